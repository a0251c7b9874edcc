WITH ranked AS (
  SELECT customer_id, order_date, ROW_NUMBER() OVER (PARTITION BY customer_id ORDER BY order_date, order_id) AS n FROM orders)
SELECT ROUND(AVG(julianday(b.order_date) - julianday(a.order_date)), 2) AS avg_days
FROM ranked a JOIN ranked b ON a.customer_id = b.customer_id AND a.n = 1 AND b.n = 2
