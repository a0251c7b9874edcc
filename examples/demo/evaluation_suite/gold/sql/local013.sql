SELECT carrier, ROUND(AVG(julianday(delivered_date) - julianday(shipped_date)), 2) AS avg_days
FROM shipments WHERE delivered_date IS NOT NULL GROUP BY carrier
