SELECT c.name, ROUND(AVG(json_extract(p.attributes, '$.dimensions.h')), 2) AS avg_height
FROM products p JOIN categories c ON c.category_id = p.category_id GROUP BY c.name
