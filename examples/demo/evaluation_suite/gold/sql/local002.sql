SELECT COUNT(*) AS discontinued_products FROM products WHERE discontinued = 1
