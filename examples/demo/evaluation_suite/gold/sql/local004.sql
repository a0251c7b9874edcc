SELECT ROUND(SUM(total), 2) AS delivered_total FROM orders WHERE status = 'delivered'
