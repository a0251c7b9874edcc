SELECT COUNT(*) AS customer_count FROM customers
