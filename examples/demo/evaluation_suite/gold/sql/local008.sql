SELECT p.name, SUM(oi.quantity) AS units
FROM order_items oi JOIN orders o ON o.order_id = oi.order_id JOIN products p ON p.product_id = oi.product_id
WHERE o.status <> 'cancelled'
GROUP BY p.product_id, p.name ORDER BY units DESC, p.name LIMIT 5
