SELECT w.name, COUNT(*) AS below_reorder FROM inventory i JOIN warehouses w ON w.warehouse_id = i.warehouse_id WHERE i.quantity < i.reorder_level GROUP BY w.name
