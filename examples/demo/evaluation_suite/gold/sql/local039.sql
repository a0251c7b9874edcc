SELECT CAST(strftime('%w', order_date) AS INTEGER) AS weekday, ROUND(AVG(total), 2) AS avg_total FROM orders GROUP BY weekday ORDER BY AVG(total) DESC LIMIT 1
