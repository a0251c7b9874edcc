WITH m AS (SELECT strftime('%Y-%m', order_date) AS month, COUNT(*) AS orders FROM orders WHERE order_date LIKE '2024-%' GROUP BY month)
SELECT month, orders, ROUND(100.0 * (orders - LAG(orders) OVER (ORDER BY month)) / LAG(orders) OVER (ORDER BY month), 2) AS growth_pct FROM m ORDER BY month
