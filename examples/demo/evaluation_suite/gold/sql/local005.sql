SELECT channel, COUNT(*) AS orders FROM orders GROUP BY channel
