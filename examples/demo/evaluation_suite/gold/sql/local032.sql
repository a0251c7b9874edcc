WITH spend AS (
  SELECT c.customer_id, COALESCE(SUM(CASE WHEN o.status = 'delivered' THEN o.total END), 0) AS amount
  FROM customers c LEFT JOIN orders o ON o.customer_id = c.customer_id GROUP BY c.customer_id)
SELECT CASE WHEN amount >= 3000 THEN 'VIP' WHEN amount >= 1000 THEN 'regular' WHEN amount > 0 THEN 'occasional' ELSE 'prospect' END AS segment,
       COUNT(*) AS customers
FROM spend GROUP BY segment
