package sqltext

import (
	"fmt"
	"math/rand/v2"
	"runtime"
	"strings"
	"testing"
	"time"
)

// allocPerByte is the most the classifier may allocate per byte of text
// (its tokens take 12), allocSlack what it may allocate whatever the text
// (the lexer's rules, the verdict's strings).
const (
	allocPerByte = 20
	allocSlack   = 64 << 10
)

// realisticSQL is a WITH query of CTEs like those agents write (joins,
// CASE, literals holding ';', comments, quoted names), grown to size bytes.
func realisticSQL(size int) string {
	var b strings.Builder
	b.WriteString("-- Description: revenue by customer, step by step\nWITH ")
	for i := 0; b.Len() < size-600; i++ {
		if i > 0 {
			b.WriteString(",\n")
		}
		fmt.Fprintf(&b, `cte_%d AS (
  -- step %d: revenue by customer
  SELECT c.customer_id, c."Name", SUM(o.amount * 1.07) AS revenue_%d,
         CASE WHEN o.status = 'shipped; done' THEN 1 ELSE 0 END AS shipped,
         COALESCE(NULLIF(TRIM(c.city), ''), 'unknown') AS city
  FROM customers AS c
  JOIN orders o ON o.customer_id = c.customer_id AND o.created_at >= DATE '2020-01-01'
  WHERE c.region IN ('EU', 'US', 'APAC') /* keep the big regions */
  GROUP BY 1, 2, 4, 5
  HAVING COUNT(*) > 3
)`, i, i, i)
	}
	b.WriteString("\nSELECT * FROM cte_0 ORDER BY 1 LIMIT 100;\n")
	return b.String()
}

// deepSQL nests a query in depth parentheses.
func deepSQL(depth int) string {
	return strings.Repeat("(", depth) + "SELECT 1" + strings.Repeat(")", depth)
}

// nestedGroups is a query of groups nested depth deep, "((…1…)) + ", to
// about size bytes: one token per byte, as dense as SQL gets.
func nestedGroups(depth, size int) string {
	group := strings.Repeat("(", depth) + "1" + strings.Repeat(")", depth) + "+"
	return "SELECT " + strings.Repeat(group, max(1, size/len(group))) + "0"
}

// randomNesting is text of random parentheses, words, literals and
// statements, never nested deeper than depth, about size bytes.
func randomNesting(r *rand.Rand, depth, size int) string {
	pieces := []string{"a", "1", ",", "'x;y'", " ", "/* c */", "f(", ".", "--n\n", "SELECT", "+", "`q`", `"d"`}
	var b strings.Builder
	b.WriteString("SELECT ")
	open := 0
	for b.Len() < size {
		switch n := r.IntN(10); {
		case n < 3 && open < depth:
			b.WriteByte('(')
			open++
		case n < 5 && open > 0:
			b.WriteByte(')')
			open--
		default:
			p := pieces[r.IntN(len(pieces))]
			if p == "f(" {
				if open >= depth {
					continue
				}
				open++
			}
			b.WriteString(p)
		}
	}
	b.WriteString(strings.Repeat(")", open))
	return b.String()
}

// allocated is what one call of classify allocates, in bytes.
func allocated(sql string, d Dialect) (uint64, Verdict) {
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	v := Classify(sql, d)
	runtime.ReadMemStats(&after)
	return after.TotalAlloc - before.TotalAlloc, v
}

// TestClassifyMemoryIsLinear: whatever the text (realistic SQL, dense
// nesting at the depth limit, random nesting, many statements, text over
// the limits), one classification allocates at most allocPerByte bytes per
// byte of text (the lexer's old token slices cost 165-530). Not parallel:
// the allocation counter is the process's.
func TestClassifyMemoryIsLinear(t *testing.T) {
	r := rand.New(rand.NewPCG(50, 3))
	tests := []struct {
		name string
		sql  string
		// refused: the reason it must give, "" when admitted.
		refused string
	}{
		{"realistic, at the size limit", realisticSQL(MaxSQLBytes), ""},
		{"dense nesting at the depth limit", nestedGroups(MaxNesting, MaxSQLBytes-2000), ""},
		{"one token per byte", "SELECT " + strings.Repeat("1,", MaxSQLBytes/2-8) + "1", ""},
		{"a script of 100,000 statements", strings.Repeat("SELECT 1;", MaxSQLBytes/9), "?"}, // admitted in BigQuery only
		{"a million parentheses", deepSQL(500_000), "nest deeper than 1000"},
		{"over the size limit", realisticSQL(5 << 20), "over the limit of 1048576 bytes"},
	}
	for i := range 8 {
		tests = append(tests, struct {
			name    string
			sql     string
			refused string
		}{fmt.Sprintf("random nesting %d", i), randomNesting(r, 1+r.IntN(MaxNesting), 1+r.IntN(256<<10)), "?"})
	}
	for _, tt := range tests {
		for _, d := range []Dialect{SQLite, Snowflake, BigQuery} {
			got, v := allocated(tt.sql, d)
			bound := uint64(allocPerByte*len(tt.sql) + allocSlack)
			if got > bound {
				t.Errorf("%s, %s: %d bytes of text allocated %d bytes (%.1f per byte), over %d", tt.name, d, len(tt.sql), got, float64(got)/float64(len(tt.sql)), bound)
			}
			switch {
			case tt.refused == "?":
			case tt.refused == "" && !v.Allowed:
				t.Errorf("%s, %s: refused (%s), want admitted", tt.name, d, v.Reason)
			case tt.refused != "" && (v.Allowed || !strings.Contains(v.Reason, tt.refused)):
				t.Errorf("%s, %s: allowed %v, reason %.200q; want refused saying %q", tt.name, d, v.Allowed, v.Reason, tt.refused)
			}
		}
	}
}

// TestClassifyLimits: text over MaxSQLBytes is refused naming its length
// and the limit, parentheses deeper than MaxNesting naming the limit; text
// at both limits is admitted.
func TestClassifyLimits(t *testing.T) {
	t.Parallel()
	atSize := "SELECT 1" + strings.Repeat(" ", MaxSQLBytes-8)
	tests := []struct {
		name, sql string
		// want is the refusal's reason, "" for admitted.
		want string
	}{
		{"at the size limit", atSize, ""},
		{"a byte over the size limit", atSize + " ", fmt.Sprintf("the SQL text is %d bytes, over the limit of %d bytes", MaxSQLBytes+1, MaxSQLBytes)},
		{"at the depth limit", deepSQL(MaxNesting), ""},
		{"a level deeper", deepSQL(MaxNesting + 1), "parentheses nest deeper than 1000 levels (at byte 1000)"},
		{"deep inside a function call", "SELECT f" + deepSQL(MaxNesting+1), "parentheses nest deeper than 1000 levels"},
		{"parentheses in strings do not count", "SELECT '" + strings.Repeat("(", 5000) + "'", ""},
		{"closing parentheses do not go negative", "SELECT 1" + strings.Repeat(")", 5000) + deepSQL(MaxNesting+1), "parentheses nest deeper"},
	}
	for _, tt := range tests {
		for _, d := range []Dialect{SQLite, Snowflake, BigQuery} {
			v := Classify(tt.sql, d)
			if tt.want == "" && !v.Allowed {
				t.Errorf("%s, %s: refused (%s), want admitted", tt.name, d, v.Reason)
			}
			if tt.want != "" && (v.Allowed || !strings.Contains(v.Reason, tt.want)) {
				t.Errorf("%s, %s: allowed %v, reason %.200q; want refused saying %q", tt.name, d, v.Allowed, v.Reason, tt.want)
			}
		}
	}
}

// FuzzClassifyBounded: any pattern, repeated and nested, classifies
// within the allocation bound, and nesting past MaxNesting is refused.
func FuzzClassifyBounded(f *testing.F) {
	for _, s := range []string{"1,", "(", ")", "a.b ", "'x' ", "/*c*/", "--c\n", ";", "SELECT 1;", "`a.b`.c"} {
		f.Add(s, uint16(4000), uint16(10), uint8(0))
		f.Add(s, uint16(100), uint16(MaxNesting+1), uint8(1))
	}
	dialects := []Dialect{SQLite, Snowflake, BigQuery}
	f.Fuzz(func(t *testing.T, pattern string, repeat, depth uint16, di uint8) {
		d := dialects[int(di)%len(dialects)]
		if len(pattern)*int(repeat) > 2*MaxSQLBytes {
			repeat = uint16(2 * MaxSQLBytes / max(1, len(pattern)))
		}
		sql := strings.Repeat("(", int(depth)) + "SELECT " + strings.Repeat(pattern, int(repeat)) + strings.Repeat(")", int(depth))
		got, v := allocated(sql, d)
		if bound := uint64(allocPerByte*len(sql) + allocSlack); got > bound {
			t.Fatalf("%s: %d bytes of text allocated %d bytes, over %d", d, len(sql), got, bound)
		}
		if int(depth) > MaxNesting && v.Allowed {
			t.Fatalf("%s: admitted text nested %d deep", d, depth)
		}
	})
}

// benchClassify reports what classifying sql costs per byte of text:
// bytes allocated and seconds per MiB.
func benchClassify(b *testing.B, sql string, classify func(string, Dialect) Verdict) {
	b.ReportAllocs()
	b.SetBytes(int64(len(sql)))
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	start := time.Now()
	var v Verdict
	n := 0
	for b.Loop() {
		v = classify(sql, Snowflake)
		n++
	}
	took := time.Since(start) //clock:ok a benchmark's figure (b.ReportMetric), not asserted
	runtime.ReadMemStats(&after)
	mib := float64(len(sql)) / (1 << 20)
	b.ReportMetric(float64(after.TotalAlloc-before.TotalAlloc)/float64(n)/float64(len(sql)), "B/input-byte")
	b.ReportMetric(took.Seconds()/float64(n)/mib, "s/MiB")
	b.Logf("%d bytes: allowed %v: %.80s", len(sql), v.Allowed, v.Reason)
}

// unbounded classifies without the size limit, to measure the classifier
// itself on text larger than it accepts.
func unbounded(sql string, d Dialect) Verdict { return classify(sql, d, Policy{}) }

// BenchmarkClassifyLarge: 5 MB of realistic SQL, classified whole (the
// classifier's own cost) and through Classify (refused by size), and a
// text at the size limit.
func BenchmarkClassifyLarge(b *testing.B) {
	large := realisticSQL(5 << 20)
	b.Run("5MB-classified", func(b *testing.B) { benchClassify(b, large, unbounded) })
	b.Run("5MB-refused", func(b *testing.B) { benchClassify(b, large, Classify) })
	b.Run("1MiB", func(b *testing.B) { benchClassify(b, realisticSQL(MaxSQLBytes), Classify) })
}

// BenchmarkClassifyDeep: a million nested parentheses (refused at the
// depth limit, whole or through Classify) and dense groups nested at the
// limit (admitted).
func BenchmarkClassifyDeep(b *testing.B) {
	b.Run("1M-levels-classified", func(b *testing.B) { benchClassify(b, deepSQL(1_000_000), unbounded) })
	b.Run("500k-levels", func(b *testing.B) { benchClassify(b, deepSQL(500_000), Classify) })
	b.Run("groups-at-limit-1MiB", func(b *testing.B) { benchClassify(b, nestedGroups(MaxNesting, MaxSQLBytes-2000), Classify) })
}
