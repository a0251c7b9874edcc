SELECT device, COUNT(*) AS events FROM events_20240310 WHERE event_name = 'view_item' GROUP BY device ORDER BY events DESC LIMIT 1
