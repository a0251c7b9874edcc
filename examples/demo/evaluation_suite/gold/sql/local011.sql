SELECT w.name, SUM(i.quantity) AS units FROM inventory i JOIN warehouses w ON w.warehouse_id = i.warehouse_id GROUP BY w.name
