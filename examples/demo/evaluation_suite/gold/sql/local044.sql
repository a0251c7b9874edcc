WITH c AS (SELECT country, city, COUNT(*) AS customers FROM customers GROUP BY country, city)
SELECT country, city, customers FROM (SELECT *, RANK() OVER (PARTITION BY country ORDER BY customers DESC) AS rnk FROM c) WHERE rnk = 1
