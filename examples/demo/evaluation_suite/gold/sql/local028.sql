SELECT json_extract(attributes, '$.material') AS material, COUNT(*) AS products FROM products GROUP BY material
