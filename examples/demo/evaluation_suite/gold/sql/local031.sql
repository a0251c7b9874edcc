SELECT json_extract(params, '$.campaign') AS campaign, COUNT(*) AS purchases FROM events_20240308 WHERE event_name = 'purchase' AND json_extract(params, '$.campaign') IS NOT NULL GROUP BY campaign
