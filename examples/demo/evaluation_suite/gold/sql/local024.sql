SELECT COUNT(DISTINCT session_id) AS sessions FROM events_20240305
