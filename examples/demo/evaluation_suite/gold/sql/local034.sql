SELECT COUNT(*) AS customers FROM (SELECT customer_id FROM orders GROUP BY customer_id HAVING COUNT(*) >= 2 AND SUM(status <> 'delivered') = 0)
