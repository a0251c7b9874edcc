WITH daily AS (SELECT order_date, SUM(total) AS amount FROM orders WHERE order_date BETWEEN '2024-03-01' AND '2024-03-31' GROUP BY order_date)
SELECT order_date, ROUND(amount, 2) AS amount, ROUND(SUM(amount) OVER (ORDER BY order_date), 2) AS running_total FROM daily ORDER BY order_date
