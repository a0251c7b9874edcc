SELECT ROUND(100.0 * SUM(method = 'card') / COUNT(*), 2) AS card_pct FROM payments
