WITH o AS (SELECT total, ROW_NUMBER() OVER (ORDER BY total) AS rn, COUNT(*) OVER () AS n FROM orders WHERE order_date LIKE '2024-%')
SELECT ROUND(AVG(total), 2) AS median_total FROM o WHERE rn IN ((n + 1) / 2, (n + 2) / 2)
