SELECT c.name AS category, ROUND(AVG(p.price), 2) AS avg_price FROM products p JOIN categories c ON c.category_id = p.category_id GROUP BY c.name
