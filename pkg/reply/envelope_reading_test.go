package reply_test

// An envelope does not change what a reply says (issue 52). The generator
// here wraps a query, correct or misspelt as models and llmsim's noise
// write them ("FORM t"), in one to three drawn wrappers (fences with any
// info string, markup tags glued to what they hold or on lines of their
// own, so "<x>```" opens a fence inside a tag; inline code; an indented
// block; JSON strings at depth one or two), with prose around and CRLF
// line endings at random, and requires the reading of the bare ```sql
// block: the same statement, never a refusal. A reply with a draft and its
// answer wraps both in the same wrappers, each carrying the same leading
// comment ("-- final answer", copied from one to the other): the prose
// between them says which is final.

import (
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/quorumsql/quorum/pkg/reply"
	"github.com/quorumsql/quorum/pkg/sqltext"
)

// readingQueries are queries of the demo (llmsim's gold) and their
// shapes: CTEs, subqueries, window functions, literals holding keywords.
var readingQueries = []string{
	"SELECT COUNT(*) AS discontinued_products FROM products WHERE discontinued = 1",
	"SELECT name FROM categories WHERE parent_id IS NULL ORDER BY name",
	"SELECT ROUND(100.0 * SUM(method = 'card') / COUNT(*), 2) AS card_pct FROM payments",
	"SELECT w.name, COUNT(*) AS below_reorder FROM inventory i JOIN warehouses w ON w.warehouse_id = i.warehouse_id\nWHERE i.quantity < i.reorder_level GROUP BY w.name",
	"SELECT COUNT(DISTINCT customer_id) AS active_customers FROM orders WHERE status <> 'cancelled' AND order_date > date('2024-12-31', '-90 days')",
	"WITH ranked AS (\n  SELECT customer_id, order_date, ROW_NUMBER() OVER (PARTITION BY customer_id ORDER BY order_date, order_id) AS n FROM orders)\nSELECT ROUND(AVG(julianday(b.order_date) - julianday(a.order_date)), 2) AS avg_days\nFROM ranked a JOIN ranked b ON a.customer_id = b.customer_id AND a.n = 1 AND b.n = 2",
	"SELECT * FROM (\nSELECT COUNT(*) AS customer_count FROM customers\n) AS t LIMIT 1000000 OFFSET 1",
	"select json_extract(params, '$.campaign') as campaign, COUNT(*) as purchases from events_20240308 where event_name = 'purchase' group by campaign",
	"SELECT o.coupon_code, COUNT(*) AS orders FROM orders o JOIN promotions p ON p.code = o.coupon_code WHERE p.note = 'select from' GROUP BY o.coupon_code",
}

// misspelt is q with its first FROM written FORM, in the case it had, as
// llmsim's noise writes it; "" when q has none outside its literals.
func misspelt(q string) string {
	for _, w := range sqltext.Words(q, sqltext.Options{}) {
		if strings.EqualFold(w.Text, "FROM") {
			form := "FORM"
			if w.Text == "from" {
				form = "form"
			}
			return q[:w.Start] + form + q[w.Start+len(w.Text):]
		}
	}
	return ""
}

// wrapper is one drawn envelope: every choice made when it is drawn, so
// that it wraps a draft and its answer alike.
type wrapper struct {
	desc string
	wrap func(inner string) string
}

// drawWrapper draws a wrapper; innermost ones may be inline code (around
// one line) or an indented block. noFinal keeps "final" out of names and
// keys: one would mark a draft final too.
func drawWrapper(r *rand.Rand, innermost, oneLine, noFinal bool) wrapper {
	for {
		switch k := r.IntN(10); {
		case k < 4:
			ch := pick(r, "`", "`", "~")
			n := 3 + r.IntN(3)
			info := genInfo(r)
			return wrapper{"fence " + ch + " " + fmt.Sprintf("%q", info), func(inner string) string {
				run := strings.Repeat(ch, max(n, longestRun(inner, ch[0])+1))
				return run + info + "\n" + inner + "\n" + run
			}}
		case k < 7:
			name := genTagName(r)
			if noFinal && strings.Contains(strings.ToLower(name), "final") {
				continue
			}
			attrs := ""
			for i := r.IntN(3); i > 0; i-- {
				// Valued: a bare word after a name is not markup ("<b AND c>").
				attrs += " " + randWord(r) + pick(r, `="`+randWord(r)+`"`, "='"+randWord(r)+" "+randWord(r)+"'", "="+randWord(r))
			}
			glueOpen, glueClose := r.IntN(2) == 0, r.IntN(2) == 0
			return wrapper{fmt.Sprintf("tag <%s%s> glued %v/%v", name, attrs, glueOpen, glueClose), func(inner string) string {
				open, end := "<"+name+attrs+">", "</"+name+">"
				if !glueOpen {
					open += "\n"
				}
				if !glueClose {
					end = "\n" + end
				}
				return open + inner + end
			}}
		case k == 7 && innermost && oneLine:
			return wrapper{"inline", func(inner string) string { return "`" + inner + "`" }}
		case k == 7 && innermost:
			return wrapper{"indent", func(inner string) string { return "    " + strings.ReplaceAll(inner, "\n", "\n    ") }}
		case k >= 8:
			keys := []string{"sql", "query", "answer", "result", "output", "content", "q", randWord(r)}
			key, outer := pick(r, keys...), pick(r, keys...)
			deep, pretty := r.IntN(2) == 0, r.IntN(2) == 0
			return wrapper{fmt.Sprintf("json %q deep %v", key, deep), func(inner string) string {
				s, _ := json.Marshal(inner)
				doc := `{"` + key + `": ` + string(s) + `, "confidence": 0.7}`
				if deep {
					doc = `{"` + outer + `": ` + doc + `, "dialect": "sqlite"}`
				}
				if pretty {
					var v any
					if json.Unmarshal([]byte(doc), &v) == nil {
						b, _ := json.MarshalIndent(v, "", "  ")
						doc = string(b)
					}
				}
				return doc
			}}
		}
	}
}

// drawChain draws one to three wrappers, innermost first.
func drawChain(r *rand.Rand, oneLine, noFinal bool) []wrapper {
	ws := make([]wrapper, 1+r.IntN(3))
	for i := range ws {
		ws[i] = drawWrapper(r, i == 0, oneLine, noFinal)
	}
	return ws
}

func applyChain(ws []wrapper, q string) string {
	for _, w := range ws {
		q = w.wrap(q)
	}
	return q
}

func chainDesc(ws []wrapper) string {
	d := make([]string, len(ws))
	for i, w := range ws {
		d[i] = w.desc
	}
	return strings.Join(d, " < ")
}

// lineEndings writes text with CRLF line endings half the time.
func lineEndings(r *rand.Rand, text string) string {
	if r.IntN(2) == 0 {
		return strings.ReplaceAll(text, "\n", "\r\n")
	}
	return text
}

// payloads are the queries and their misspelt writings whose bare ```sql
// block reads as the query itself.
func payloads(t *testing.T) []string {
	t.Helper()
	var out []string
	for _, q := range readingQueries {
		for _, p := range []string{q, misspelt(q)} {
			if p == "" {
				continue
			}
			got, err := reply.SQL("```sql\n"+p+"\n```", "stop")
			if err != nil || reply.Key(got) != reply.Key(p) {
				t.Fatalf("the bare ```sql block of %q reads as %q (%v), want the query itself", p, got, err)
			}
			out = append(out, p)
		}
	}
	return out
}

// TestEnvelopesKeepTheReading: any drawn envelope around a query, correct
// or misspelt, reads as its bare ```sql block does.
func TestEnvelopesKeepTheReading(t *testing.T) {
	t.Parallel()
	ps := payloads(t)
	for i := range 3000 {
		r := envRand(*envelopeSeed^0x52, i, 0)
		p := ps[r.IntN(len(ps))]
		ws := drawChain(r, !strings.Contains(p, "\n"), false)
		text := applyChain(ws, p)
		if r.IntN(2) == 0 {
			text = pick(r, "Here is the query:", "Using what the operations show, the query is:", "Below is my answer.") + "\n\n" + text
		}
		if r.IntN(2) == 0 {
			text += "\n\n" + pick(r, "It returns the rows the question asks for.", "This should run as is on the database.")
		}
		text = lineEndings(r, text)
		got, err := reply.SQL(text, "stop")
		if err != nil || reply.Key(got) != reply.Key(p) {
			t.Fatalf("draw %d (%s): read %q (error %v), want %q as its ```sql block reads\nreply: %q", i, chainDesc(ws), got, err, p, text)
		}
	}
}

// TestEnvelopesKeepTheFinal: a draft and its answer in the same wrappers,
// both led by the comment the answer carries, read as the answer the
// prose between them names.
func TestEnvelopesKeepTheFinal(t *testing.T) {
	t.Parallel()
	ps := payloads(t)
	for i := range 2000 {
		r := envRand(*envelopeSeed^0xf1a1, i, 0)
		p := ps[r.IntN(len(ps))]
		draft := draftOf(p)
		ws := drawChain(r, false, true)
		final := applyChain(ws, "-- final answer\n"+p)
		first := applyChain(ws, "-- final answer\n"+draft)
		var text string
		if r.IntN(2) == 0 {
			text = first + "\n\n" + pick(r, "Actually, a better version is:", "Wait, this is not quite right. The corrected version:") + "\n\n" + final
		} else {
			text = pick(r, "Final answer:", "My final SQL:") + "\n\n" + final + "\n\n" +
				pick(r, "For comparison, my first attempt (not the answer) was:", "An earlier draft, kept for reference only:") + "\n\n" + first
		}
		text = lineEndings(r, text)
		got, err := reply.SQL(text, "stop")
		if err != nil || reply.Key(got) != reply.Key(p) {
			what := "neither"
			if err == nil && reply.Key(got) == reply.Key(draft) {
				what = "the draft"
			}
			t.Fatalf("draw %d (%s): read %s, %q (error %v), want the answer %q\nreply: %q", i, chainDesc(ws), what, got, err, p, text)
		}
	}
}

// draftOf is p with its first number changed, or DISTINCT added.
func draftOf(p string) string {
	for _, w := range sqltext.Words(p, sqltext.Options{}) {
		if w.Text[0] >= '0' && w.Text[0] <= '9' {
			return p[:w.Start] + w.Text + "7" + p[w.Start+len(w.Text):]
		}
	}
	i := strings.Index(strings.ToUpper(p), "SELECT")
	return p[:i+6] + " DISTINCT" + p[i+6:]
}

// TestMisreadRepliesOfIssue52 pins the replies the envelopes persona sent
// RAISE's final models that the reader misread (refusals, a draft, a
// closing tag in the query, two drafts joined).
func TestMisreadRepliesOfIssue52(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct{ name, text, want string }{
		{"inline code in a text fence in a SQL fence",
			"Using what the operations show about the tables and values, the query is:\r\n\r\n~~~postgres title=\"smzlqj4.sql\"\r\n``` text\r\n`SELECT COUNT(*) AS discontinued_products FORM products WHERE discontinued = 1`\r\n```\r\n~~~",
			"SELECT COUNT(*) AS discontinued_products FORM products WHERE discontinued = 1"},
		{"misspelt query in inline code",
			"Using what the operations show about the tables and values, the query is:\n\n`SELECT name FORM categories WHERE parent_id IS NULL ORDER BY name`",
			"SELECT name FORM categories WHERE parent_id IS NULL ORDER BY name"},
		{"misspelt query glued to its closing tag",
			"<x-29>\nSELECT ROUND(SUM(total), 2) AS delivered_total\u200b FORM orders WHERE status = 'delivered'</x-29>\n",
			"SELECT ROUND(SUM(total), 2) AS delivered_total FORM orders WHERE status = 'delivered'"},
		{"fences opened inside tags",
			"Here is a corrected query.\n\n<x-95>```\nSELECT * FROM (\nSELECT COUNT(*) AS customer_count FROM customers\n) AS t LIMIT 1000000 OFFSET 4\n```</x-95>\n\nHmm, a better version is:\n\n<x-95>```\nSELECT * FROM (\nSELECT COUNT(*) AS customer_count FROM customers\n) AS t LIMIT 1000000 OFFSET 1\n```</x-95>\n",
			"SELECT * FROM (\nSELECT COUNT(*) AS customer_count FROM customers\n) AS t LIMIT 1000000 OFFSET 1"},
		{"the answer's comment copied into the draft",
			"Final answer:\n\n[{\"zm\": {\"sql\": \"    -- final answer\\n    select c.name, ROUND(AVG(p.price), 2) as avg_price from products p join categories c on c.category_id = p.category_id group by c.name\"}}]\n\nFor comparison, my first attempt (not the answer) was:\n\n{\"dzwfp7\": [\"    -- final answer\\n    select c.name, ROUND(AVG(p.price), 3) as avg_price from products p join categories c on c.category_id = p.category_id group by c.name\"]}",
			"select c.name, ROUND(AVG(p.price), 2) as avg_price from products p join categories c on c.category_id = p.category_id group by c.name"},
		{"a stray semicolon inside the query",
			"```mysql\n    SELECT * FROM (\n    select COUNT(*) as n from orders where status <> 'cancelled';\n    ) AS t LIMIT 1000000 OFFSET 1\n```",
			"SELECT * FROM (\n    select COUNT(*) as n from orders where status <> 'cancelled';\n    ) AS t LIMIT 1000000 OFFSET 1"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			got, err := reply.SQL(tt.text, "stop")
			var u *reply.Unreadable
			switch {
			case errors.As(err, &u):
				t.Fatalf("read as unreadable (refusal %v: %s), want %q", u.Refusal, u.Problem, tt.want)
			case err != nil || reply.Key(got) != reply.Key(tt.want):
				t.Fatalf("read %q (error %v), want %q", got, err, tt.want)
			}
		})
	}
}

// TestVerdictInEnvelopes: a JSON verdict reads the same in any drawn
// envelope, also held as a JSON string (once: quoting JSON twice is no
// model's habit) inside an array or an object, as the envelopes persona
// writes ["{\"correct\": true, …}"].
func TestVerdictInEnvelopes(t *testing.T) {
	t.Parallel()
	for i := range 2000 {
		r := envRand(*envelopeSeed^0x7e4d, i, 0)
		want := r.IntN(2) == 0
		v := `{"correct": ` + fmt.Sprint(want) + `, "explanation": "It asks for the same rows.", "back_translated_query": "How many orders are there?"}`
		if r.IntN(2) == 0 {
			v = `{"` + pick(r, "verdict", "result", "evaluation") + `": ` + v + `}`
		}
		var desc []string
		quoted := false
		for n := 1 + r.IntN(3); n > 0; n-- {
			k := r.IntN(4)
			if k < 2 && quoted {
				k = 2
			}
			quoted = quoted || k < 2
			switch k {
			case 0:
				s, _ := json.Marshal(v)
				v, desc = "["+string(s)+"]", append(desc, "a string in an array")
			case 1:
				s, _ := json.Marshal(v)
				v, desc = `{"`+randWord(r)+`": `+string(s)+`}`, append(desc, "a string in an object")
			case 2:
				v, desc = "["+v+"]", append(desc, "an array")
			default:
				w := drawWrapper(r, false, false, false)
				if strings.HasPrefix(w.desc, "json") {
					continue // a string, as the cases above
				}
				v, desc = w.wrap(v), append(desc, w.desc)
			}
		}
		text := lineEndings(r, pick(r, "", "Here is my assessment:\n\n")+v)
		f, err := reply.JSON(text)
		if err != nil {
			t.Fatalf("draw %d (%s): %v\nreply: %q", i, strings.Join(desc, " < "), err, text)
		}
		if got, present, err := f.Bool("correct"); err != nil || !present || got != want {
			t.Fatalf("draw %d (%s): correct=%v (present %v, %v), want %v\nreply: %q", i, strings.Join(desc, " < "), got, present, err, want, text)
		}
	}
}
