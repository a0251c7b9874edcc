package trace

import (
	"fmt"
	"io"
	"strings"
	"time"
)

// RenderOptions say how much of the texts Render prints.
type RenderOptions struct {
	// Full prints every text whole; otherwise each is cut to Cut
	// characters on one line.
	Full bool
	Cut  int
}

// Render prints an example's trace as a tree in time order: its start,
// each task with its calls and queries, each decision, and the answer.
func Render(w io.Writer, x *Export, o RenderOptions) error {
	if o.Cut <= 0 {
		o.Cut = 160
	}
	p := &printer{w: w, o: o}
	head := fmt.Sprintf("example %s · run %s", x.Example, x.Run)
	if x.Agent != "" {
		head += " · agent " + x.Agent
	}
	if x.Level != "" {
		head += " · trace " + x.Level
	}
	for _, e := range x.Entries {
		if e.TraceID != "" {
			head += " · otel " + e.TraceID
			break
		}
	}
	p.line(head)
	if len(x.Entries) == 0 {
		p.line("  (no trace recorded: the run's --trace was none, or the example has not started)")
		return p.err
	}
	t0 := x.Entries[0].At
	for i, e := range x.Entries {
		last := i == len(x.Entries)-1
		branch, pad := "├─ ", "│  "
		if last {
			branch, pad = "└─ ", "   "
		}
		at := clock(e.At.Sub(t0))
		switch {
		case e.Start != nil:
			s := e.Start
			p.line("%s %sstart: round %d, %d task(s), expects %d result(s)%s", at, branch, s.Round, len(s.Tasks), s.Expect, where(e))
			p.steps(pad, s.Steps, t0)
		case e.Task != nil:
			t := e.Task
			p.line("%s %stask %s %s (round %d, %s pool, delivery %d) %s in %s%s", at, branch, t.Kind, t.ID, t.Round, t.Pool,
				t.Delivery, t.Outcome, secs(e.End.Sub(e.At).Seconds()), where(e))
			if t.Error != "" {
				p.line("%s %serror: %s", blank, pad, p.cut(t.Error))
			}
			p.steps(pad, t.Steps, t0)
			for _, r := range t.Results {
				desc := fmt.Sprintf("candidate %d: %s, %d row(s)", r.Index, r.Status, r.Rows)
				if r.Error != "" {
					desc += " — " + p.cut(r.Error)
				}
				p.line("%s %s→ %s", blank, pad, desc)
				if r.SQL != "" {
					p.text(blank+" "+pad+"    ", "sql", r.SQL)
				}
			}
			if len(t.Next) > 0 {
				p.line("%s %s→ continues in %s", blank, pad, strings.Join(t.Next, ", "))
			}
			if t.Part {
				p.line("%s %s→ recorded its part of a join", blank, pad)
			}
		case e.Decision != nil:
			d := e.Decision
			desc := fmt.Sprintf("decision on round %d: %d candidate(s), %d valid", d.Round, len(d.Candidates), d.Valid)
			if d.Winner != "" {
				desc += fmt.Sprintf(", %d agree with the winner", d.AgreeCount())
			}
			if len(d.Clusters) > 0 {
				sizes := make([]string, len(d.Clusters))
				for i, c := range d.Clusters {
					sizes[i] = fmt.Sprintf("[%s]", strings.Join(c, " "))
				}
				desc += ", groups by result " + strings.Join(sizes, " ")
			}
			if len(d.Uncounted) > 0 {
				desc += fmt.Sprintf(", not counted [%s]", strings.Join(d.Uncounted, " "))
			}
			if d.Winner != "" {
				desc += ", winner " + d.Winner
			}
			if d.Confidence != "" || d.Method != "" {
				desc += fmt.Sprintf(" (%s, %s)", d.Confidence, d.Method)
			}
			if d.Posterior > 0 {
				desc += fmt.Sprintf(", sampling posterior %.3f", d.Posterior)
				if d.StoppedAfter > 0 {
					desc += fmt.Sprintf(" (stopped after %d candidates)", d.StoppedAfter)
				}
			}
			if d.NextRound != nil {
				desc += fmt.Sprintf(" → round %d: %s", *d.NextRound, strings.Join(d.NextTasks, ", "))
			}
			p.line("%s %s%s%s", at, branch, desc, where(e))
			for _, m := range d.Members {
				p.line("%s %smember %s: winner %s, %s, %s, %d valid, agrees %v", blank, pad, m.Agent, orNone(m.Winner), m.Confidence, m.Method, m.Valid, m.Agrees)
			}
			if d.Rule != "" {
				p.line("%s %srule: %s", blank, pad, d.Rule)
			}
		case e.Final != nil:
			f := e.Final
			desc := fmt.Sprintf("answer: %s", f.Status)
			if f.Confidence != "" {
				desc += fmt.Sprintf(", %s confidence (%s)", f.Confidence, f.Method)
			}
			desc += fmt.Sprintf(", %d round(s), %d candidate(s), %d valid", f.Rounds, f.Candidates, f.Valid)
			p.line("%s %s%s", at, branch, desc)
			if f.Error != "" {
				p.line("%s %serror: %s", blank, pad, p.cut(f.Error))
			}
			if f.SQL != "" {
				p.text(blank+" "+pad+"  ", "sql", f.SQL)
			}
		}
	}
	return p.err
}

const blank = "          "

type printer struct {
	w   io.Writer
	o   RenderOptions
	err error
}

func (p *printer) line(format string, args ...any) {
	if p.err == nil {
		_, p.err = fmt.Fprintf(p.w, format+"\n", args...)
	}
}

func (p *printer) steps(pad string, steps []Step, t0 time.Time) {
	// A conversation sends its earlier messages again on every call:
	// each is printed once per task.
	printed := map[string]bool{}
	for i, s := range steps {
		branch, sub := "├─ ", "│  "
		if i == len(steps)-1 {
			branch, sub = "└─ ", "   "
		}
		ind := pad + sub + "  "
		at := clock(s.At.Sub(t0))
		if c := s.LLM; c != nil {
			desc := fmt.Sprintf("llm %s %s: %d→%d tokens", c.Role, c.Model, c.Usage.PromptTokens, c.Usage.CompletionTokens)
			if c.Usage.ReasoningTokens > 0 {
				desc += fmt.Sprintf(" (%d reasoning)", c.Usage.ReasoningTokens)
			}
			if c.Usage.CachedTokens > 0 {
				desc += fmt.Sprintf(" (%d cached)", c.Usage.CachedTokens)
			}
			desc += ", " + secs(s.Seconds)
			if c.Usage.Attempts > 1 {
				desc += fmt.Sprintf(", %d attempts", c.Usage.Attempts)
			}
			if c.Usage.RateLimited > 0 {
				desc += fmt.Sprintf(", %d × 429", c.Usage.RateLimited)
			}
			if c.Finish != "" {
				desc += ", " + c.Finish
			}
			if c.Answered != "" {
				desc += ", answered by " + c.Answered
			}
			p.line("%s %s%s%s", at, pad, branch, desc)
			if c.Error != "" {
				p.line("%s %serror: %s", blank, ind, p.cut(c.Error))
			}
			again := 0
			for _, m := range c.Messages {
				key := m.Role + "\x00" + m.Content.Ref + "\x00" + m.Content.S
				if len(m.ToolCalls) == 0 && printed[key] {
					again++
					continue
				}
				printed[key] = true
				if again > 0 {
					p.line("%s %s(%d earlier message(s), as above)", blank, ind, again)
					again = 0
				}
				if m.Content.S != "" || len(m.ToolCalls) == 0 {
					p.text(blank+" "+ind, m.Role, m.Content.S)
				}
				for _, tc := range m.ToolCalls {
					p.text(blank+" "+ind, m.Role+" called", tc.Name+" "+tc.Arguments)
				}
			}
			if c.Reasoning.S != "" {
				p.text(blank+" "+ind, "reasoning", c.Reasoning.S)
			}
			if c.Text.S != "" || len(c.ToolCalls) == 0 && len(c.Messages) > 0 {
				p.text(blank+" "+ind, "reply", c.Text.S)
			}
			for _, tc := range c.ToolCalls {
				p.text(blank+" "+ind, "tool call", tc.Name+" "+tc.Arguments)
			}
		}
		if q := s.Query; q != nil {
			desc := fmt.Sprintf("query %s: %s, %d row(s), %s", q.Dialect, q.Status, q.Rows, secs(s.Seconds))
			if q.Truncated {
				desc += ", truncated"
			}
			p.line("%s %s%s%s", at, pad, branch, desc)
			p.text(blank+" "+ind, "sql", q.SQL.S)
			if q.Error != "" {
				p.text(blank+" "+ind, "error", q.Error)
			}
			if q.Preview.S != "" {
				p.text(blank+" "+ind, "rows", q.Preview.S)
			}
		}
	}
}

// text prints one labelled text: whole, indented, with Full; else cut to
// one line.
func (p *printer) text(ind, label, s string) {
	if !p.o.Full {
		p.line("%s%s: %s", ind, label, p.cut(s))
		return
	}
	p.line("%s%s:", ind, label)
	for _, l := range strings.Split(strings.TrimRight(s, "\n"), "\n") {
		p.line("%s %s", ind, l)
	}
}

func (p *printer) cut(s string) string {
	s = strings.Join(strings.Fields(s), " ")
	if r := []rune(s); len(r) > p.o.Cut {
		return string(r[:p.o.Cut]) + fmt.Sprintf("… (%d chars; --full prints it)", len(s))
	}
	return s
}

func clock(d time.Duration) string {
	if d < 0 {
		d = 0
	}
	m := int(d / time.Minute)
	s := (d % time.Minute).Seconds()
	return fmt.Sprintf("%3d:%06.3f", m, s)
}

func secs(s float64) string { return fmt.Sprintf("%.2f s", s) }

func where(e *Entry) string {
	if e.Process == "" {
		return ""
	}
	return " [" + e.Process + "]"
}

func orNone(s string) string {
	if s == "" {
		return "none"
	}
	return s
}
