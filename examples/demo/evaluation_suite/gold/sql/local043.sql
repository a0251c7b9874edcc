SELECT currency, ROUND(100.0 * SUM(total) / (SELECT SUM(total) FROM orders), 2) AS share_pct FROM orders GROUP BY currency
