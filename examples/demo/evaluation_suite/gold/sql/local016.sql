SELECT c.loyalty_tier, ROUND(AVG(o.total), 2) AS avg_total FROM orders o JOIN customers c ON c.customer_id = o.customer_id
GROUP BY c.loyalty_tier
