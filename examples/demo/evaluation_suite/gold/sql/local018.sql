WITH rev AS (
  SELECT c.name AS category, SUM(oi.quantity * oi.unit_price * (1 - oi.discount)) AS revenue
  FROM order_items oi JOIN products p ON p.product_id = oi.product_id JOIN categories c ON c.category_id = p.category_id
  GROUP BY c.name)
SELECT category, ROUND(revenue, 2) AS revenue FROM (SELECT *, RANK() OVER (ORDER BY revenue DESC) AS rnk FROM rev) WHERE rnk <= 3
