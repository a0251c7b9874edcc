WITH spend AS (SELECT customer_id, SUM(total) AS amount FROM orders WHERE status = 'delivered' GROUP BY customer_id),
r AS (SELECT customer_id, amount, RANK() OVER (ORDER BY amount DESC) AS rnk FROM spend)
SELECT c.first_name || ' ' || c.last_name AS customer, ROUND(r.amount, 2) AS amount FROM r JOIN customers c ON c.customer_id = r.customer_id WHERE r.rnk <= 3
