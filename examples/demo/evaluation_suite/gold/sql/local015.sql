SELECT e.first_name, e.last_name, e.department, e.salary FROM employees e
WHERE e.salary > (SELECT AVG(salary) FROM employees x WHERE x.department = e.department)
