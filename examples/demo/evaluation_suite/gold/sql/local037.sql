WITH r AS (SELECT c.name AS category, p.name AS product, p.price, DENSE_RANK() OVER (PARTITION BY c.category_id ORDER BY p.price DESC) AS rnk
  FROM products p JOIN categories c ON c.category_id = p.category_id WHERE c.parent_id IS NOT NULL)
SELECT category, product, price FROM r WHERE rnk = 2
