package trace

import (
	"fmt"
	"slices"
	"strings"
	"time"
)

// pageText is a text of WriteHTML's page, collapsed under its label.
type pageText struct {
	Label, Body string
	// ID anchors a long text's first appearance; Same links a later
	// one to it (a conversation repeats its earlier messages on
	// every call).
	ID, Same string
}

// pageStep is a call or query of an entry, as the page shows it.
type pageStep struct {
	At, Head, Class string
	Texts           []pageText
}

// pageEntry is an entry of the trace, as the page shows it.
type pageEntry struct {
	At, Head, Class, Error string
	Steps                  []pageStep
	Lines                  []string
	Texts                  []pageText
}

// htmlPage turns an example's entries into what tracePage shows. It is one
// per page because the anchors of long texts (seen) span every entry.
type htmlPage struct {
	// t0 is when the first entry began: the page's times count from it.
	t0 time.Time
	// seen maps a long text's Ref to the anchor of its first appearance.
	seen map[string]string
}

func newHTMLPage(x *Export) *htmlPage {
	p := &htmlPage{seen: map[string]string{}}
	if len(x.Entries) > 0 {
		p.t0 = x.Entries[0].At
	}
	return p
}

// plainText is a text shown whole wherever it appears.
func plainText(label, body string) pageText { return pageText{Label: label, Body: body} }

// text is a trace Text: a long one (a blob Ref) is shown once and linked
// to from its later appearances.
func (p *htmlPage) text(label string, t Text) pageText {
	if t.Ref == "" {
		return plainText(label, t.S)
	}
	if id, ok := p.seen[t.Ref]; ok {
		return pageText{Label: label, Same: id}
	}
	id := fmt.Sprintf("t%d", len(p.seen)+1)
	p.seen[t.Ref] = id
	return pageText{Label: label, Body: t.S, ID: id}
}

func (p *htmlPage) entry(e *Entry) pageEntry {
	en := pageEntry{At: clock(e.At.Sub(p.t0))}
	switch {
	case e.Start != nil:
		en.Class, en.Head = "start", fmt.Sprintf("start: round %d, %d task(s)", e.Start.Round, len(e.Start.Tasks))
		en.Steps = p.steps(e.Start.Steps)
	case e.Task != nil:
		p.task(&en, e)
	case e.Decision != nil:
		decisionEntry(&en, e.Decision)
	case e.Final != nil:
		f := e.Final
		en.Class = "final"
		en.Head = fmt.Sprintf("answer: %s · %s · %s", f.Status, f.Confidence, f.Method)
		en.Error = f.Error
		if f.SQL != "" {
			en.Texts = append(en.Texts, plainText("final SQL", f.SQL))
		}
	}
	return en
}

func (p *htmlPage) task(en *pageEntry, e *Entry) {
	t := e.Task
	en.Class = "task " + t.Outcome
	en.Head = fmt.Sprintf("task %s %s · round %d · %s pool · delivery %d · %s · %s · %s", t.Kind, t.ID, t.Round, t.Pool, t.Delivery,
		t.Outcome, secs(e.End.Sub(e.At).Seconds()), e.Process)
	en.Error = t.Error
	en.Steps = p.steps(t.Steps)
	for _, r := range t.Results {
		l := fmt.Sprintf("candidate %d: %s, %d row(s)", r.Index, r.Status, r.Rows)
		if r.Error != "" {
			l += " — " + r.Error
		}
		en.Lines = append(en.Lines, l)
		if r.SQL != "" {
			en.Texts = append(en.Texts, plainText(fmt.Sprintf("candidate %d SQL", r.Index), r.SQL))
		}
	}
	if len(t.Next) > 0 {
		en.Lines = append(en.Lines, "continues in "+strings.Join(t.Next, ", "))
	}
}

func decisionEntry(en *pageEntry, d *Decision) {
	en.Class = "decision"
	en.Head = fmt.Sprintf("decision on round %d · %d candidate(s), %d valid", d.Round, len(d.Candidates), d.Valid)
	if d.Winner != "" {
		en.Head += fmt.Sprintf(" · %d agree with the winner", d.AgreeCount())
	}
	en.Head += fmt.Sprintf(" · %s · %s", d.Confidence, d.Method)
	for i, c := range d.Clusters {
		what := "the same result"
		if i == 0 && slices.Contains(c, d.Winner) {
			what = "agree with the winner"
		}
		en.Lines = append(en.Lines, fmt.Sprintf("group %d (%d %s): %s", i+1, len(c), what, strings.Join(c, " ")))
	}
	if len(d.Uncounted) > 0 {
		en.Lines = append(en.Lines, fmt.Sprintf("not counted in the vote (%d): %s", len(d.Uncounted), strings.Join(d.Uncounted, " ")))
	}
	if d.Winner != "" {
		en.Lines = append(en.Lines, "winner: candidate "+d.Winner)
	}
	if d.NextRound != nil {
		en.Lines = append(en.Lines, fmt.Sprintf("opens round %d: %s", *d.NextRound, strings.Join(d.NextTasks, ", ")))
	}
	for _, m := range d.Members {
		en.Lines = append(en.Lines, fmt.Sprintf("member %s: winner %s, %s, %s, agrees %v", m.Agent, orNone(m.Winner), m.Confidence, m.Method, m.Agrees))
	}
}

func (p *htmlPage) steps(ss []Step) []pageStep {
	var out []pageStep
	for _, s := range ss {
		st := pageStep{At: clock(s.At.Sub(p.t0))}
		if c := s.LLM; c != nil {
			p.call(&st, c, s.Seconds)
		}
		if q := s.Query; q != nil {
			p.query(&st, q, s.Seconds)
		}
		out = append(out, st)
	}
	return out
}

func (p *htmlPage) call(st *pageStep, c *Call, seconds float64) {
	st.Class = "llm"
	st.Head = fmt.Sprintf("LLM %s · %s · %d → %d tokens · %s", c.Role, c.Model, c.Usage.PromptTokens, c.Usage.CompletionTokens, secs(seconds))
	if c.Usage.RateLimited > 0 {
		st.Head += fmt.Sprintf(" · %d × 429", c.Usage.RateLimited)
	}
	if c.Finish != "" {
		st.Head += " · " + c.Finish
	}
	if c.Error != "" {
		st.Texts = append(st.Texts, plainText("error", c.Error))
	}
	for _, m := range c.Messages {
		if m.Content.S != "" || len(m.ToolCalls) == 0 {
			st.Texts = append(st.Texts, p.text(m.Role, m.Content))
		}
		for _, tc := range m.ToolCalls {
			st.Texts = append(st.Texts, plainText(m.Role+" called", tc.Name+" "+tc.Arguments))
		}
	}
	if c.Reasoning.S != "" {
		st.Texts = append(st.Texts, p.text("reasoning", c.Reasoning))
	}
	reply := c.Text.S
	for _, tc := range c.ToolCalls {
		reply += "\n→ " + tc.Name + " " + tc.Arguments
	}
	if reply != "" {
		st.Texts = append(st.Texts, plainText("reply", strings.TrimPrefix(reply, "\n")))
	}
}

func (p *htmlPage) query(st *pageStep, q *Query, seconds float64) {
	st.Class = "query"
	st.Head = fmt.Sprintf("query %s · %s · %d row(s) · %s", q.Dialect, q.Status, q.Rows, secs(seconds))
	st.Texts = append(st.Texts, p.text("sql", q.SQL))
	if q.Error != "" {
		st.Texts = append(st.Texts, plainText("error", q.Error))
	}
	if q.Preview.S != "" {
		st.Texts = append(st.Texts, plainText("rows", q.Preview.S))
	}
}
