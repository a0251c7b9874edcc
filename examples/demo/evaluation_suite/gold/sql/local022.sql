WITH lines AS (
  SELECT COALESCE(parent.name, c.name) AS top_category,
         oi.quantity * oi.unit_price * (1 - oi.discount) AS revenue,
         oi.quantity * p.cost AS cost
  FROM order_items oi JOIN orders o ON o.order_id = oi.order_id
  JOIN products p ON p.product_id = oi.product_id
  JOIN categories c ON c.category_id = p.category_id
  LEFT JOIN categories parent ON parent.category_id = c.parent_id
  WHERE o.status NOT IN ('cancelled', 'returned'))
SELECT top_category, ROUND(100.0 * (SUM(revenue) - SUM(cost)) / SUM(revenue), 2) AS gross_margin_pct FROM lines GROUP BY top_category
