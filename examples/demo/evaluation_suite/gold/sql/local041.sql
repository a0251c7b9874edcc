SELECT p.name, ROUND(AVG(r.rating), 2) AS avg_rating FROM reviews r JOIN products p ON p.product_id = r.product_id
WHERE r.status = 'published' GROUP BY p.product_id HAVING COUNT(*) >= 10 ORDER BY AVG(r.rating) DESC, p.name LIMIT 5
