SELECT substr(event_time, 1, 10) AS day, COUNT(*) AS purchases FROM (
  SELECT event_time, event_name FROM events_20240301
  UNION ALL SELECT event_time, event_name FROM events_20240302
  UNION ALL SELECT event_time, event_name FROM events_20240303
  UNION ALL SELECT event_time, event_name FROM events_20240304
  UNION ALL SELECT event_time, event_name FROM events_20240305
  UNION ALL SELECT event_time, event_name FROM events_20240306
  UNION ALL SELECT event_time, event_name FROM events_20240307
  UNION ALL SELECT event_time, event_name FROM events_20240308
  UNION ALL SELECT event_time, event_name FROM events_20240309
  UNION ALL SELECT event_time, event_name FROM events_20240310
  UNION ALL SELECT event_time, event_name FROM events_20240311
  UNION ALL SELECT event_time, event_name FROM events_20240312
  UNION ALL SELECT event_time, event_name FROM events_20240313
  UNION ALL SELECT event_time, event_name FROM events_20240314
) WHERE event_name = 'purchase' GROUP BY day ORDER BY day
