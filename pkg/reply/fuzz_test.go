package reply_test

// Fuzz targets of the reply reader.
//
// FuzzReader steers the envelope generator (envelope_gen_test.go) with the
// fuzzer's bytes and requires the same property as
// TestReaderFindsGoldInEnvelopes: the gold query comes back (up to
// Normalize), the final query after a draft, no query from a refusal.
// Run it alone (two targets share the prefix):
//
//	go test ./pkg/reply/ -run '^$' -fuzz '^FuzzReader$' -fuzztime 60s
//
// FuzzReaderNoPanic feeds arbitrary text to reply.SQL and reply.Statements.

import (
	"errors"
	"math/rand/v2"
	"strings"
	"testing"
	"unicode"

	"github.com/quorumsql/quorum/pkg/reply"
	"github.com/quorumsql/quorum/pkg/sqltext"
)

// statementsOf is reply.Statements; envelope_statements_test.go sets it, so
// that this file compiles whether or not Statements exists yet.
var statementsOf func(string) []string

func FuzzReader(f *testing.F) {
	c, err := loadGold()
	if err != nil {
		f.Fatal(err)
	}
	if len(c.queries) == 0 {
		f.Skipf("no gold SQL at %s: skipping FuzzReader", goldGlob)
	}
	for i := 0; i < 24; i++ {
		f.Add(uint64(i), uint16(i*37), []byte(nil))
	}
	f.Add(uint64(52), uint16(3), []byte{7, 1, 200, 3, 99, 0, 255, 12})
	f.Add(uint64(1), uint16(100), []byte{255, 255, 255, 255, 255, 255})
	f.Add(uint64(2), uint16(200), []byte{0, 0, 0, 0, 0, 0, 0, 0, 0, 0})
	f.Fuzz(func(t *testing.T, seed uint64, idx uint16, structure []byte) {
		gi := int(idx) % len(c.queries)
		q := &c.queries[gi]
		r := rand.New(&byteSource{b: structure, pcg: rand.NewPCG(seed, uint64(idx))})
		switch r.IntN(8) {
		case 0:
			tb := c.genTwoBlocks(r, gi)
			text, _, want, desc := c.renderTwo(tb)
			got, p, err := readSQL(text)
			if p == nil && err == nil && sqltext.Normalize(got, q.opt) == sqltext.Normalize(want, q.opt) {
				return
			}
			t.Fatalf("reply.SQL did not return the final query %s after a draft\n  construction: %s\n  reply: %q\n  got:  %s\n  want: %q",
				q.name, desc, trunc(text, 1500), outcome{got: got, err: err, panicked: p}.gotString(q.opt), trunc(q.norm, 300))
		case 1:
			rf := genRefusal(r)
			got, p, err := readSQL(rf.text)
			var u *reply.Unreadable
			if p == nil && errors.As(err, &u) {
				return
			}
			t.Fatalf("refusal read as SQL (%s):\n  reply: %q\n  got: %q, err %v, panic %v", rf.desc, rf.text, got, err, p)
		default:
			e := c.genEnvelope(r, gi)
			o := c.check(e)
			if o.ok {
				return
			}
			t.Fatalf("reply.SQL misread gold %s (%s) in envelope\n    %s\n  reply (%d bytes): %q\n  got:  %s\n  want: %q",
				q.name, q.dialect, o.desc, len(o.text), trunc(o.text, 1500), o.gotString(q.opt), trunc(q.norm, 300))
		}
	})
}

// decodedInput is what a reply may decode to without inventing words: format
// characters (zero-width spaces, BOM) removed, lower-cased.
func decodedInput(s string) string {
	return strings.ToLower(strings.Map(func(c rune) rune {
		if unicode.Is(unicode.Cf, c) {
			return -1
		}
		return c
	}, s))
}

// checkFound: a statement the reader returns is not empty, and, when the
// input has no escapes that could spell words (JSON \u…, numeric character
// references), every bare word of it occurs in the input.
func checkFound(t *testing.T, data, got, who string) {
	t.Helper()
	if strings.TrimSpace(got) == "" || sqltext.Normalize(got, sqltext.Options{}) == "" {
		t.Fatalf("%s returned an empty statement %q for %q", who, got, data)
	}
	if strings.Contains(data, `\`) || strings.Contains(data, "&#") {
		return
	}
	in := decodedInput(data)
	for _, w := range sqltext.Words(got, sqltext.Options{}) {
		if !strings.Contains(in, strings.ToLower(w.Text)) {
			t.Fatalf("%s returned %q, whose word %q is not in the input %q", who, got, w.Text, data)
		}
	}
}

func FuzzReaderNoPanic(f *testing.F) {
	for _, s := range []string{
		"", " ", "\ufeff", "```", "```sql\n", "```sql\nSELECT 1\n```", "~~~~\nSELECT 1;\n~~~~",
		"<x>", "</x>", "<sql>SELECT a FROM t</sql>", `{"sql":`, `{"sql": "SELECT 1"}`, `["SELECT 1", 2]`,
		"SELECT", "SELECT 'unterminated", "WITH a AS (", "WITH a AS (SELECT 1) SELECT * FROM a", "/* open",
		"-- only a comment", "    SELECT 1", "`SELECT 1`", "SELECT 1;\nSELECT 2;", "\u200bSELECT\u00a01",
		"With the schema given I cannot tell which table to select from…",
		"Here's the query:\n```sql\nSELECT a FROM t WHERE b = 'x'\n```\nIt's short.",
		strings.Repeat("(", 2000), strings.Repeat("```", 100), strings.Repeat("<a>", 300),
		strings.Repeat(`{"a":[`, 200),
	} {
		f.Add(s)
	}
	r := envRand(*envelopeSeed^0xf022, 0, 0)
	for i := 0; i < 20; i++ {
		f.Add(genRefusal(r).text)
	}
	if c, err := loadGold(); err == nil && len(c.queries) > 0 {
		for i := 0; i < 40; i++ {
			gi := r.IntN(len(c.queries))
			text, _, _, _ := c.render(c.genEnvelope(r, gi))
			f.Add(text)
			if i%4 == 0 {
				text, _, _, _ := c.renderTwo(c.genTwoBlocks(r, gi))
				f.Add(text)
			}
		}
	}
	f.Fuzz(func(t *testing.T, data string) {
		for _, finish := range []string{"", reply.FinishLength} {
			got, err := reply.SQL(data, finish)
			if err != nil {
				var u *reply.Unreadable
				if !errors.As(err, &u) {
					t.Fatalf("reply.SQL(%q, %q): error %T %v, want *reply.Unreadable", data, finish, err, err)
				}
				continue
			}
			checkFound(t, data, got, "reply.SQL")
		}
		if statementsOf == nil {
			return
		}
		sts := statementsOf(data)
		for _, s := range sts {
			checkFound(t, data, s, "reply.Statements")
		}
		// The answer is one of the statements the reply holds.
		if got, err := reply.SQL(data, ""); err == nil {
			n := sqltext.Normalize(got, sqltext.Options{})
			for _, s := range sts {
				if sqltext.Normalize(s, sqltext.Options{}) == n {
					return
				}
			}
			t.Fatalf("reply.SQL returned %q, which is not among reply.Statements %q (input %q)", got, sts, data)
		}
	})
}
