package reply_test

// The envelope properties for reply.Statements, kept apart from
// envelope_test.go because they were written before Statements existed.

import (
	"fmt"
	"strings"
	"testing"

	"github.com/quorumsql/quorum/pkg/reply"
	"github.com/quorumsql/quorum/pkg/sqltext"
)

func init() { statementsOf = reply.Statements }

// readStatements calls reply.Statements, turning a panic into a failure.
func readStatements(text string) (got []string, panicked any) {
	defer func() { panicked = recover() }()
	return reply.Statements(text), nil
}

// sameStatements compares got with want statement by statement, up to
// Normalize in opts[i]'s dialect.
func sameStatements(got, want []string, opts []sqltext.Options) bool {
	if len(got) != len(want) {
		return false
	}
	for i := range got {
		if sqltext.Normalize(got[i], opts[i]) != sqltext.Normalize(want[i], opts[i]) {
			return false
		}
	}
	return true
}

func showStatements(sts []string, opts []sqltext.Options, p any) string {
	if p != nil {
		return fmt.Sprintf("panic: %v", p)
	}
	var b strings.Builder
	fmt.Fprintf(&b, "%d statement(s)", len(sts))
	for i, s := range sts {
		opt := sqltext.Options{}
		if i < len(opts) {
			opt = opts[i]
		}
		fmt.Fprintf(&b, "\n    [%d] %q", i, trunc(sqltext.Normalize(s, opt), 200))
	}
	return b.String()
}

// TestReaderStatementsInEnvelopes: reply.Statements finds exactly the gold
// query in a random envelope (prose and JSON fillers hold no statement).
func TestReaderStatementsInEnvelopes(t *testing.T) {
	c := needGold(t)
	n := 8
	if testing.Short() {
		n = 2
	}
	base := *envelopeSeed ^ 0x57a7
	tl := newTally()
	total, failed := 0, 0
	forms := map[string]int{}
	var order []string
	fails := func(x envelope) bool {
		text, want, _, _ := c.render(x)
		got, p := readStatements(text)
		return p != nil || !sameStatements(got, []string{want}, []sqltext.Options{c.queries[x.gold].opt})
	}
	for gi := range c.queries {
		q := &c.queries[gi]
		for k := 0; k < n; k++ {
			e := c.genEnvelope(envRand(base, gi, k), gi)
			text, want, desc, feats := c.render(e)
			got, p := readStatements(text)
			opts := []sqltext.Options{q.opt}
			ok := p == nil && sameStatements(got, []string{want}, opts)
			total++
			tl.add(feats, !ok)
			if ok {
				continue
			}
			failed++
			if failed <= 60 {
				m := c.shrink(e, fails)
				_, _, md, _ := c.render(m)
				key := md + " around " + c.queries[m.gold].name
				if forms[key]++; forms[key] == 1 {
					order = append(order, key)
				}
			}
			if failed > 10 {
				continue
			}
			t.Errorf("reply.Statements misread gold %s (%s) in envelope\n    %s\n  seed: -envelope.seed=%d (statements base %d), gold #%d, envelope #%d\n  reply (%d bytes): %q\n  got:  %s\n  want: 1 statement %q",
				q.name, q.dialect, desc, *envelopeSeed, base, gi, k, len(text), trunc(text, 900), showStatements(got, opts, p), trunc(q.norm, 200))
		}
	}
	if failed > 0 {
		tl.log(t)
		var b strings.Builder
		for _, k := range order {
			fmt.Fprintf(&b, "\n  %3d× %s", forms[k], k)
		}
		t.Errorf("reply.Statements misread %d of %d envelopes; the first %d failures shrink to %d distinct forms:%s",
			failed, total, min(failed, 60), len(order), b.String())
	}
}

// TestReaderStatementsDraftFinal: a reply with a draft and a final query
// holds both, in order.
func TestReaderStatementsDraftFinal(t *testing.T) {
	c := needGold(t)
	n := 2
	if testing.Short() {
		n = 1
	}
	base := *envelopeSeed ^ 0xd4af7 // the replies of TestReaderFindsFinalAfterDraft
	total, failed := 0, 0
	for gi := range c.queries {
		q := &c.queries[gi]
		for k := 0; k < n; k++ {
			tb := c.genTwoBlocks(envRand(base, gi, k), gi)
			text, draft, want, desc := c.renderTwo(tb)
			opts := []sqltext.Options{c.queries[tb.draft.gold].opt, q.opt}
			got, p := readStatements(text)
			total++
			if p == nil && sameStatements(got, []string{draft, want}, opts) {
				continue
			}
			failed++
			if failed > 10 {
				continue
			}
			t.Errorf("reply.Statements did not find the draft and the final query\n  construction: %s\n  seed: -envelope.seed=%d (draft/final base %d), gold #%d, reply #%d\n  reply (%d bytes): %q\n  got:  %s\n  want: [draft %s, final %s]",
				desc, *envelopeSeed, base, gi, k, len(text), trunc(text, 1200), showStatements(got, opts, p), c.queries[tb.draft.gold].name, q.name)
		}
	}
	if failed > 0 {
		t.Errorf("reply.Statements missed a block in %d of %d draft/final replies", failed, total)
	}
}

// TestReaderStatementsRefusals: a refusal holds no statement.
func TestReaderStatementsRefusals(t *testing.T) {
	m := 300
	if testing.Short() {
		m = 80
	}
	base := *envelopeSeed ^ 0x7ef05a1 // the replies of TestReaderRefusals
	texts := append([]string{}, refusalExamples...)
	descs := make([]string, len(texts))
	for i := 0; i < m; i++ {
		rf := genRefusal(envRand(base, 0, i))
		texts = append(texts, rf.text)
		descs = append(descs, fmt.Sprintf("refusal #%d: %s", i, rf.desc))
	}
	failed := 0
	for i, text := range texts {
		got, p := readStatements(text)
		if p == nil && len(got) == 0 {
			continue
		}
		failed++
		if failed <= 12 {
			t.Errorf("reply.Statements found statements in a refusal (%s):\n  reply: %q\n  got: %s", descs[i], trunc(text, 600), showStatements(got, nil, p))
		}
	}
	if failed > 0 {
		t.Errorf("reply.Statements found statements in %d of %d refusals", failed, len(texts))
	}
}
