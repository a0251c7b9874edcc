package serve

import (
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/quorumsql/quorum/pkg/dataset"
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
		// The wrapper's OFFSET drops a row of the answer: it is said.
		{"an agent's wrapper", "SELECT *\nFROM (\n  SELECT channel, COUNT(*) AS orders\n  FROM orders\n  GROUP BY channel ) AS t\nLIMIT 1000000 OFFSET 1",
			"Counted rows per channel in orders, then skipping the first row and keeping at most 1000000 rows"},
		{"a wrapper's limit", "SELECT * FROM (SELECT name FROM products ORDER BY price DESC) LIMIT 3",
			"Listed name in products, highest price first, then at most 3 rows"},
		{"a subquery in FROM", "SELECT AVG(n) FROM (SELECT customer_id, COUNT(*) AS n FROM orders GROUP BY customer_id) AS per_customer",
			"Averaged n in per_customer (after 1 intermediate step)"},
		{"offset", "SELECT name FROM products ORDER BY price DESC LIMIT 1 OFFSET 1", "Listed name in products, the one with the 2nd highest price"},
		{"sqlite limit offset, count", "SELECT name FROM products ORDER BY price LIMIT 2, 5", "Listed name in products, bottom 5 by price, after skipping the first 2 rows"},
		{"offset without order", "SELECT name FROM products LIMIT 10 OFFSET 20", "Listed name in products, skipping the first 20 rows and keeping at most 10 rows"},
		{"fetch", "SELECT name FROM products ORDER BY price DESC OFFSET 5 ROWS FETCH NEXT 10 ROWS ONLY",
			"Listed name in products, top 10 by price, after skipping the first 5 rows"},
		{"order by position and more keys", "SELECT city, COUNT(*) FROM customers GROUP BY 1 ORDER BY 2 DESC, city",
			"Counted rows per city in customers, highest count first, then city"},
		{"distinct with an aggregate", "SELECT DISTINCT city, COUNT(*) FROM customers GROUP BY city",
			"Counted rows (distinct rows) per city in customers"},
		{"rounded aggregate", "SELECT strftime('%Y-%m', d) AS month, ROUND(SUM(total), 2) AS amount FROM orders GROUP BY month",
			"Summed total (rounded) per month in orders"},
		{"a window beside", "SELECT d, SUM(x) OVER (ORDER BY d) AS running FROM t",
			"Listed d and sum(x) over(order by d) in t"},
		{"qualify", "SELECT id, name FROM products QUALIFY ROW_NUMBER() OVER (PARTITION BY category ORDER BY price DESC) = 1",
			"Listed id and name in products, keeping rows where row_number() over(partition by category order by price desc) = 1"},
		{"union", "SELECT name FROM customers UNION SELECT name FROM suppliers ORDER BY name",
			"Listed name in customers; together with the rows of: listed name in suppliers (duplicates removed); of all that, ordered by name"},
		{"union all in parentheses", "(SELECT a FROM t LIMIT 1) UNION ALL (SELECT a FROM u LIMIT 1)",
			"Listed a in t, at most 1 row; together with the rows of: listed a in u, at most 1 row"},
		{"except", "WITH x AS (SELECT 1) SELECT id FROM a EXCEPT SELECT id FROM b",
			"Listed id in a (after 1 intermediate step); less the rows of: listed id in b"},
		{"left join with a filter", "SELECT c.name, COUNT(r.id) FROM customers c LEFT JOIN returns r ON r.customer_id = c.id AND r.status = 'ok' GROUP BY c.name",
			"Counted r.id per c.name in customers left-joined with returns (on r.status = 'ok')"},
		{"is distinct from", "SELECT id FROM t WHERE a IS DISTINCT FROM b", "Listed id in t, filtered to a is distinct from b"},
		{"not a query", "PRAGMA table_info(t)", ""},
		// What it cannot say, it does not restate.
		{"a named window", "SELECT SUM(x) OVER w FROM t WINDOW w AS (ORDER BY d)", ""},
		{"two statements", "SELECT 1; SELECT 2", ""},
		{"a pivot", "SELECT * FROM t PIVOT (SUM(x) FOR y IN ('a', 'b'))", ""},
		{"a sample", "SELECT * FROM t TABLESAMPLE SYSTEM (10 PERCENT)", ""},
		{"values", "VALUES (1), (2)", ""},
		{"a limit expression", "SELECT a FROM t LIMIT 1 + 1", ""},
	} {
		if got := Understood(c.sql, sqltext.SQLite); got != c.want {
			t.Errorf("%s: Understood(%q)\n got %q\nwant %q", c.name, c.sql, got, c.want)
		}
	}
}

// TestUnderstoodSaysEveryClause: over real queries (the demo's gold SQL
// and, when ../shared/data is there, every Spider 2.0 gold query), the
// restatement says each clause the statement has at its own level, or is
// "" (not shown): never a line that leaves out a LIMIT, an OFFSET, a
// HAVING or a set operation. The clauses are found here from the lexer's
// tokens, apart from Understood's reading.
func TestUnderstoodSaysEveryClause(t *testing.T) {
	demo, _ := filepath.Glob("../../../examples/demo/evaluation_suite/gold/sql/*.sql")
	if len(demo) == 0 {
		t.Fatal("no gold SQL under examples/demo")
	}
	spider, _ := filepath.Glob("../../../../shared/data/spider2-gold-sql/*/*.sql")
	if len(spider) == 0 {
		t.Log("../shared/data/spider2-gold-sql is absent: only the demo's gold SQL is read")
	}
	never := regexp.MustCompile(`[^\s\S]`)
	says := map[string]*regexp.Regexp{
		"from":      regexp.MustCompile(` in `),
		"where":     regexp.MustCompile(`filtered to`),
		"group":     regexp.MustCompile(` per `),
		"having":    regexp.MustCompile(`keeping groups where`),
		"qualify":   regexp.MustCompile(`keeping rows where`),
		"order":     regexp.MustCompile(`ordered by|top |bottom |highest|lowest`),
		"limit":     regexp.MustCompile(`at most|top |bottom |the one`),
		"fetch":     regexp.MustCompile(`at most|top |bottom |the one`),
		"offset":    regexp.MustCompile(`skipping|the \d+(st|nd|rd|th) `),
		"distinct":  regexp.MustCompile(`distinct|duplicates removed`),
		"union":     regexp.MustCompile(`together with`),
		"intersect": regexp.MustCompile(`also in`),
		"except":    regexp.MustCompile(`less the rows of`),
		"minus":     regexp.MustCompile(`less the rows of`),
		"window":    never,
	}
	shown := map[bool]int{}
	demoShown := 0
	for _, f := range append(demo, spider...) {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		sql := string(b)
		d, ok := dataset.DialectFromID(filepath.Base(f))
		if !ok {
			t.Fatalf("%s: no dialect for its name", f)
		}
		got := Understood(sql, d)
		shown[got != ""]++
		if got == "" {
			continue
		}
		if slices.Contains(demo, f) {
			demoShown++
		}
		toks := sqltext.Tokens(sql, d.LexOptions())
		if kwAt(toks, 0, "with") && !strings.Contains(got, "intermediate step") {
			t.Errorf("%s: WITH, not said in %q", f, got)
		}
		for i, tk := range toks {
			re, ok := says[tk.Text]
			if !ok || !tk.Word || tk.Depth != 0 {
				continue
			}
			prev := ""
			if i > 0 {
				prev = toks[i-1].Text
			}
			switch {
			case tk.Text == "offset" && (prev == "[" || prev == "with"): // BigQuery's a[OFFSET(0)], UNNEST(…) WITH OFFSET
				continue
			case tk.Text == "except" && prev == "*", tk.Text == "from" && prev == "distinct": // SELECT * EXCEPT (columns); IS DISTINCT FROM
				continue
			case (tk.Text == "group" || tk.Text == "order") && !kwAt(toks, i+1, "by"): // WITHIN GROUP (ORDER BY …)
				continue
			}
			if !re.MatchString(got) {
				t.Errorf("%s: %s at the top level, not said in %q:\n%s", f, strings.ToUpper(tk.Text), got, sql)
			}
		}
	}
	t.Logf("restated %d queries, left %d unsaid", shown[true], shown[false])
	// Saying nothing would pass the above: most must be said.
	if demoShown < len(demo)*3/4 || shown[true] < (shown[true]+shown[false])*3/4 {
		t.Errorf("restated %d of the demo's %d queries and %d of %d in all: most should be", demoShown, len(demo), shown[true], shown[true]+shown[false])
	}
}

func kwAt(toks []sqltext.Token, i int, w string) bool {
	return i < len(toks) && toks[i].Word && toks[i].Depth == 0 && toks[i].Text == w
}

// TestUnderstoodTakesAnyPrefix: Understood reads what a model wrote, cut
// anywhere: every prefix of every demo and Spider 2.0 gold query, cut at
// each token, and each with a token dropped, is read without a panic
// (a half query is "" or a line, never a crash of the request).
func TestUnderstoodTakesAnyPrefix(t *testing.T) {
	files, _ := filepath.Glob("../../../examples/demo/evaluation_suite/gold/sql/*.sql")
	spider, _ := filepath.Glob("../../../../shared/data/spider2-gold-sql/*/*.sql")
	files = append(files, spider...)
	read := 0
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		d, _ := dataset.DialectFromID(filepath.Base(f))
		toks := sqltext.Tokens(string(b), d.LexOptions())
		// At most about 60 cuts a query, spread over it (a long query's
		// every token would take the suite's time, not find more).
		for cut := 0; cut <= len(toks); cut += max(1, len(toks)/60) {
			for _, variant := range [][]sqltext.Token{toks[:cut], slices.Delete(slices.Clone(toks), min(cut, len(toks)-1), min(cut+1, len(toks)))} {
				texts := make([]string, len(variant))
				for i, tk := range variant {
					texts[i] = tk.Text
				}
				sql := strings.Join(texts, " ")
				func() {
					defer func() {
						if p := recover(); p != nil {
							t.Fatalf("%s: Understood panicked on %q: %v", f, sql, p)
						}
					}()
					Understood(sql, d)
				}()
				read++
			}
		}
	}
	t.Logf("%d cut or gapped queries read", read)
}
