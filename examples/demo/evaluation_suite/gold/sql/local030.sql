WITH e AS (
  SELECT event_name, params FROM events_20240301
  UNION ALL SELECT event_name, params FROM events_20240302
  UNION ALL SELECT event_name, params FROM events_20240303
  UNION ALL SELECT event_name, params FROM events_20240304
  UNION ALL SELECT event_name, params FROM events_20240305
  UNION ALL SELECT event_name, params FROM events_20240306
  UNION ALL SELECT event_name, params FROM events_20240307
)
SELECT json_extract(j.value, '$.product_id') AS product_id, SUM(json_extract(j.value, '$.qty')) AS quantity
FROM e, json_each(e.params, '$.items') j WHERE e.event_name = 'add_to_cart'
GROUP BY product_id ORDER BY quantity DESC, product_id LIMIT 1
