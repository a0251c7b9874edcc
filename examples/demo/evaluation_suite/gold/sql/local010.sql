SELECT COUNT(*) AS customers FROM customers c
WHERE c.signup_date BETWEEN '2023-01-01' AND '2023-12-31'
  AND NOT EXISTS (SELECT 1 FROM orders o WHERE o.customer_id = c.customer_id)
