package serve

import (
	"testing"

	"github.com/quorumsql/quorum/pkg/sqltext"
)

// TestUnderstood: the one-line restatement read from the SQL, for the
// shapes answers take.
func TestUnderstood(t *testing.T) {
	for _, c := range []struct{ name, sql, want string }{
		{"count", "SELECT COUNT(*) FROM customers", "Counted rows in customers"},
		{"grouped top n",
			"SELECT customer_id, COUNT(*) AS n FROM sales.orders WHERE strftime('%Y', order_date) = '2023' GROUP BY customer_id ORDER BY n DESC LIMIT 10;",
			"Counted rows per customer_id in sales.orders, filtered to strftime('%Y', order_date) = '2023', top 10 by the count"},
		{"join sum filters",
			`SELECT c."channel", SUM(o.amount) total FROM orders o JOIN customers c ON c.id = o.customer_id WHERE o.status <> 'cancelled' AND o.amount BETWEEN 1 AND 100 GROUP BY c.channel`,
			"Summed o.amount per c.channel in orders joined with customers, filtered to o.status <> 'cancelled' and o.amount between 1 and 100"},
		{"list ordered", "--Description: names\nSELECT name, email FROM customers ORDER BY name", "Listed name and email in customers, ordered by name"},
		{"the highest", "SELECT name FROM products ORDER BY price DESC LIMIT 1", "Listed name in products, the one with the highest price"},
		{"star limit", "select * from orders limit 5", "Listed every column in orders, at most 5 rows"},
		{"distinct", "SELECT DISTINCT country FROM customers", "Listed the distinct country in customers"},
		{"cte", "WITH m AS (SELECT strftime('%m', d) AS month, amount FROM orders) SELECT month, AVG(amount) FROM m GROUP BY month ORDER BY month",
			"Averaged amount per month in m (after 1 intermediate step), ordered by month"},
		{"having", "SELECT city, MAX(amount) FROM orders GROUP BY city HAVING COUNT(*) > 5",
			"Took the largest amount per city in orders, keeping groups where count(*) > 5"},
		{"many columns", "SELECT a, b, c, d, e, f FROM t", "Listed a, b, c, d and 2 more in t"},
		{"an agent's wrapper", "SELECT *\nFROM (\n  SELECT channel, COUNT(*) AS orders\n  FROM orders\n  GROUP BY channel ) AS t\nLIMIT 1000000 OFFSET 1",
			"Counted rows per channel in orders"},
		{"a subquery in FROM", "SELECT AVG(n) FROM (SELECT customer_id, COUNT(*) AS n FROM orders GROUP BY customer_id) AS per_customer",
			"Averaged n in per_customer"},
		{"not a query", "PRAGMA table_info(t)", ""},
	} {
		if got := Understood(c.sql, sqltext.SQLite); got != c.want {
			t.Errorf("%s: Understood(%q)\n got %q\nwant %q", c.name, c.sql, got, c.want)
		}
	}
}
