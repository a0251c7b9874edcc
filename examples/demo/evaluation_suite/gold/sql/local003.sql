SELECT name FROM categories WHERE parent_id IS NULL ORDER BY name
