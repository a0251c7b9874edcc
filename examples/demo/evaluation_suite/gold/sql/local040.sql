SELECT o.coupon_code, COUNT(*) AS orders, ROUND(SUM(o.discount), 2) AS total_discount FROM orders o JOIN promotions p ON p.code = o.coupon_code GROUP BY o.coupon_code
