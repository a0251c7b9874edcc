package reply_test

// Property tests of the reply reader: every Spider 2.0 gold query, in random
// envelopes (envelope_gen_test.go), must come back from reply.SQL as the same
// statement (up to sqltext.Normalize in its dialect); prose that begins with
// a SQL word but holds no query must be reported unreadable.

import (
	"errors"
	"fmt"
	"strings"
	"testing"
	"unicode"

	"github.com/quorumsql/quorum/pkg/reply"
	"github.com/quorumsql/quorum/pkg/sqltext"
)

// readSQL calls reply.SQL, turning a panic into a reported failure so that
// one bad envelope does not hide the others.
func readSQL(text string) (got string, panicked any, err error) {
	defer func() { panicked = recover() }()
	got, err = reply.SQL(text, "")
	return got, nil, err
}

type outcome struct {
	text, want, desc string
	feats            []string
	got              string
	err              error
	panicked         any
	ok               bool
}

func (c *goldCorpus) check(e envelope) outcome {
	o := outcome{}
	o.text, o.want, o.desc, o.feats = c.render(e)
	o.got, o.panicked, o.err = readSQL(o.text)
	q := &c.queries[e.gold]
	o.ok = o.panicked == nil && o.err == nil && sqltext.Normalize(o.got, q.opt) == sqltext.Normalize(o.want, q.opt)
	return o
}

func (o outcome) gotString(opt sqltext.Options) string {
	switch {
	case o.panicked != nil:
		return fmt.Sprintf("panic: %v", o.panicked)
	case o.err != nil:
		return fmt.Sprintf("error %v", o.err)
	}
	return fmt.Sprintf("%q", trunc(sqltext.Normalize(o.got, opt), 300))
}

func dropSpace(s string) string {
	return strings.Map(func(c rune) rune {
		if unicode.IsSpace(c) {
			return -1
		}
		return c
	}, s)
}

// TestReaderEnvelopeGenerator checks the generator itself: prose never starts
// a line with a statement keyword, refusals always do, envelopes render
// deterministically and hold the query verbatim.
func TestReaderEnvelopeGenerator(t *testing.T) {
	r := envRand(*envelopeSeed, -1, 0)
	firstWord := func(line string) string {
		line = strings.TrimLeftFunc(line, func(c rune) bool { return !unicode.IsLetter(c) })
		end := strings.IndexFunc(line, func(c rune) bool { return !unicode.IsLetter(c) })
		if end >= 0 {
			line = line[:end]
		}
		return strings.ToLower(line)
	}
	isKeyword := func(w string) bool {
		for _, k := range statementKeywords {
			if w == k {
				return true
			}
		}
		return false
	}
	for i := 0; i < 3000; i++ {
		p := genProse(r, 1+r.IntN(4), r.IntN(2) == 0)
		for _, line := range strings.Split(p, "\n") {
			if w := firstWord(line); line != "" && isKeyword(w) {
				t.Fatalf("generated prose starts a line with %q: %q", w, line)
			}
		}
		if strings.Contains(strings.ToLower(p), "final") {
			t.Fatalf("generated prose mentions a final query: %q", p)
		}
	}
	for _, o := range refusalOpeners {
		if w := firstWord(o); !isKeyword(w) {
			t.Errorf("refusal opener %q does not start with a statement keyword", o)
		}
	}
	for _, s := range append(append([]string{}, fixedSentences...), refusalFollowUps...) {
		if isKeyword(firstWord(s)) {
			t.Errorf("sentence %q starts with a statement keyword", s)
		}
	}

	c, err := loadGold()
	if err != nil {
		t.Fatal(err)
	}
	if c.files == 0 {
		t.Skipf("no gold SQL at %s: skipping the envelope checks", goldGlob)
	}
	c.logSummary(t)
	for gi, q := range c.queries {
		for k := 0; k < 3; k++ {
			e := c.genEnvelope(envRand(*envelopeSeed, gi, k), gi)
			text, want, desc, _ := c.render(e)
			text2, _, _, _ := c.render(e)
			if text != text2 {
				t.Fatalf("%s: envelope %s renders differently twice", q.name, desc)
			}
			if sqltext.Normalize(want, q.opt) != q.norm {
				t.Fatalf("%s: the embedded query changed identity in %s", q.name, desc)
			}
			hasJSON := false
			for _, l := range e.layers {
				hasJSON = hasJSON || l.kind == kJSON
			}
			if hasJSON {
				continue
			}
			// Indentation (indented blocks, list-item fences, YAML) and line
			// endings aside, the query is in the reply as written.
			if !strings.Contains(dropSpace(text), dropSpace(want)) {
				t.Fatalf("%s: envelope %s does not hold the query verbatim:\n%s", q.name, desc, text)
			}
		}
	}
}

// TestReaderFindsGoldInEnvelopes: for every gold query and N random
// envelopes, reply.SQL returns the query (up to Normalize in its dialect).
func TestReaderFindsGoldInEnvelopes(t *testing.T) {
	c := needGold(t)
	c.logSummary(t)
	n := 20
	if testing.Short() {
		n = 3
	}
	base := *envelopeSeed
	const maxShrunk, maxReports = 80, 12
	tl := newTally()
	total, failed, shrunk := 0, 0, 0
	forms := map[string]int{} // smallest failing form -> how many failures shrank to it
	var order []string
	for gi := range c.queries {
		q := &c.queries[gi]
		for k := 0; k < n; k++ {
			e := c.genEnvelope(envRand(base, gi, k), gi)
			o := c.check(e)
			total++
			tl.add(o.feats, !o.ok)
			if o.ok {
				continue
			}
			failed++
			if shrunk >= maxShrunk {
				continue
			}
			shrunk++
			m := c.shrink(e, func(x envelope) bool { return !c.check(x).ok })
			mo := c.check(m)
			key := mo.desc + " around " + c.queries[m.gold].name
			forms[key]++
			if forms[key] > 1 {
				continue
			}
			order = append(order, key)
			if len(order) > maxReports {
				continue
			}
			mq := &c.queries[m.gold]
			t.Errorf("reply.SQL misread gold %s (%s) in envelope\n    %s\n  seed: -envelope.seed=%d, gold #%d, envelope #%d\n  reply (%d bytes): %q\n  got:  %s\n  want: %q\n  smallest failing form: %s around %s:\n    reply: %q\n    got:  %s\n    want: %q",
				q.name, q.dialect, o.desc, base, gi, k, len(o.text), trunc(o.text, 900),
				o.gotString(q.opt), trunc(q.norm, 300),
				mo.desc, mq.name, trunc(mo.text, 600), mo.gotString(mq.opt), trunc(mq.norm, 300))
		}
	}
	tl.log(t)
	if failed > 0 {
		var b strings.Builder
		for _, k := range order {
			fmt.Fprintf(&b, "\n  %3d× %s", forms[k], k)
		}
		t.Errorf("reply.SQL misread %d of %d envelopes around %d gold queries; the first %d failures shrink to %d distinct forms:%s",
			failed, total, len(c.queries), shrunk, len(order), b.String())
	} else {
		t.Logf("reply.SQL read all %d envelopes around %d gold queries", total, len(c.queries))
	}
}

// TestReaderFindsFinalAfterDraft: a draft query (another gold query), prose
// that marks the next block final, then the real query: reply.SQL returns
// the real one.
func TestReaderFindsFinalAfterDraft(t *testing.T) {
	c := needGold(t)
	n := 4
	if testing.Short() {
		n = 1
	}
	base := *envelopeSeed ^ 0xd4af7
	total, failed := 0, 0
	for gi := range c.queries {
		q := &c.queries[gi]
		for k := 0; k < n; k++ {
			tb := c.genTwoBlocks(envRand(base, gi, k), gi)
			text, _, want, desc := c.renderTwo(tb)
			got, p, err := readSQL(text)
			total++
			o := outcome{got: got, err: err, panicked: p}
			if p == nil && err == nil && sqltext.Normalize(got, q.opt) == sqltext.Normalize(want, q.opt) {
				continue
			}
			failed++
			if failed > 10 {
				continue
			}
			t.Errorf("reply.SQL did not return the final query %s (%s) after a draft\n  construction: %s\n  seed: -envelope.seed=%d (draft/final base %d), gold #%d, reply #%d\n  reply (%d bytes): %q\n  got:  %s\n  want: %q",
				q.name, q.dialect, desc, *envelopeSeed, base, gi, k, len(text), trunc(text, 1200), o.gotString(q.opt), trunc(q.norm, 300))
		}
	}
	if failed > 0 {
		t.Errorf("reply.SQL missed the final query in %d of %d draft/final replies", failed, total)
	}
}

// refusalExamples are written by hand; the generated ones vary them.
var refusalExamples = []string{
	"With the schema given I cannot tell which table to select from…",
	"With the schema given I cannot tell which table to select from...",
	"Select statements cannot answer this: the schema has no revenue column.",
	"From the tables listed, none records the trip duration, so I cannot write a query.",
	"Where the question asks for revenue per region, the schema has no region column.",
	"Order of events is not recorded anywhere, so I cannot rank them.",
	"With the schema given I cannot tell which table to select from.\n\nCould you tell me which table holds the orders?",
}

// TestReaderRefusals: replies that begin with a SQL keyword but hold no
// query are *reply.Unreadable.
func TestReaderRefusals(t *testing.T) {
	m := 600
	if testing.Short() {
		m = 150
	}
	type item struct{ text, desc, seed string }
	var items []item
	for i, s := range refusalExamples {
		items = append(items, item{s, "hand-written", fmt.Sprintf("example %d", i)})
	}
	base := *envelopeSeed ^ 0x7ef05a1
	for i := 0; i < m; i++ {
		rf := genRefusal(envRand(base, 0, i))
		items = append(items, item{rf.text, rf.desc, fmt.Sprintf("-envelope.seed=%d (refusal base %d), refusal #%d", *envelopeSeed, base, i)})
	}
	failed := 0
	for _, it := range items {
		got, p, err := readSQL(it.text)
		var u *reply.Unreadable
		if p == nil && errors.As(err, &u) {
			continue
		}
		failed++
		if failed > 12 {
			continue
		}
		what := fmt.Sprintf("returned %q (err %v)", trunc(got, 300), err)
		if p != nil {
			what = fmt.Sprintf("panicked: %v", p)
		}
		t.Errorf("refusal read as SQL (%s; %s):\n  reply: %q\n  reply.SQL %s", it.seed, it.desc, trunc(it.text, 600), what)
	}
	if failed > 0 {
		t.Errorf("reply.SQL read %d of %d refusals as SQL", failed, len(items))
	}
}
