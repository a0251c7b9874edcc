SELECT s.name, ROUND(AVG(p.rating), 2) AS avg_rating FROM products p JOIN suppliers s ON s.supplier_id = p.supplier_id
GROUP BY s.supplier_id, s.name ORDER BY AVG(p.rating) DESC LIMIT 1
