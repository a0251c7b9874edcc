SELECT COUNT(DISTINCT customer_id) AS active_customers FROM orders WHERE status <> 'cancelled' AND order_date > date('2024-12-31', '-90 days')
