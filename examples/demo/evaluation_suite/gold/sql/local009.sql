SELECT strftime('%Y-%m', order_date) AS month, COUNT(*) AS orders, ROUND(SUM(total), 2) AS amount
FROM orders WHERE order_date >= '2024-01-01' AND order_date < '2025-01-01' GROUP BY month ORDER BY month
