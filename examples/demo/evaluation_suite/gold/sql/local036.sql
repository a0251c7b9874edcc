SELECT m.first_name, m.last_name, COUNT(*) AS reports FROM employees e JOIN employees m ON m.employee_id = e.manager_id
GROUP BY m.employee_id ORDER BY reports DESC LIMIT 1
