WITH e AS (
  SELECT session_id, event_name FROM events_20240301
  UNION ALL SELECT session_id, event_name FROM events_20240302
  UNION ALL SELECT session_id, event_name FROM events_20240303
  UNION ALL SELECT session_id, event_name FROM events_20240304
  UNION ALL SELECT session_id, event_name FROM events_20240305
  UNION ALL SELECT session_id, event_name FROM events_20240306
  UNION ALL SELECT session_id, event_name FROM events_20240307
  UNION ALL SELECT session_id, event_name FROM events_20240308
  UNION ALL SELECT session_id, event_name FROM events_20240309
  UNION ALL SELECT session_id, event_name FROM events_20240310
  UNION ALL SELECT session_id, event_name FROM events_20240311
  UNION ALL SELECT session_id, event_name FROM events_20240312
  UNION ALL SELECT session_id, event_name FROM events_20240313
  UNION ALL SELECT session_id, event_name FROM events_20240314
)
SELECT event_name AS stage, COUNT(DISTINCT session_id) AS sessions FROM e WHERE event_name IN ('view_item', 'add_to_cart', 'begin_checkout', 'purchase') GROUP BY event_name
