SELECT COALESCE(parent.name, c.name) AS top_category, ROUND(100.0 * SUM(oi.status = 'returned') / COUNT(*), 2) AS return_rate_pct
FROM order_items oi JOIN products p ON p.product_id = oi.product_id JOIN categories c ON c.category_id = p.category_id
LEFT JOIN categories parent ON parent.category_id = c.parent_id GROUP BY top_category
