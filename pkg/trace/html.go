package trace

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"html/template"
	"io"
	"os"
	"slices"
	"strings"

	"github.com/quorumsql/quorum/pkg/outputs"
)

// WritePages writes a trace page for each example the report lists by
// name (outputs.Linked: the slowest, the most expensive, the failed, the
// wrong) from the traces in w's folder, before the report that links
// them. failed hears of a page that could not be written (the report then
// lists its example without a link).
func WritePages(w *outputs.Writer, rep *outputs.Report, question func(id string) string, failed func(id string, err error)) {
	simulated := strings.Contains(strings.ToUpper(rep.LLM), "SIMULATED")
	byID := map[string]*outputs.Example{}
	for i := range rep.Examples {
		byID[rep.Examples[i].InstanceID] = &rep.Examples[i]
	}
	for _, id := range outputs.Linked(rep) {
		raw, err := outputs.ReadTrace(w.Dir, id)
		if errors.Is(err, os.ErrNotExist) {
			continue // failed before it started: no trace
		}
		var x Export
		if err == nil {
			err = json.Unmarshal(raw, &x)
		}
		info := PageInfo{Simulated: simulated, Back: "../report.html", Question: question(id)}
		if e := byID[id]; e != nil {
			info.Status = e.Status
			if e.Error != "" {
				info.Status += ": " + e.Error
			}
			if e.Correct != nil {
				info.Correct = map[bool]string{true: "right", false: "wrong"}[*e.Correct]
			}
		}
		var buf bytes.Buffer
		if err == nil {
			x.Resolve()
			err = WriteHTML(&buf, &x, info)
		}
		if err == nil {
			err = w.Page(id, buf.Bytes())
		}
		if err != nil {
			failed(id, err)
		}
	}
}

// PageInfo is what an example's page says above its trace, from the run's
// outputs.
type PageInfo struct {
	Question  string
	Status    string
	Correct   string // "right", "wrong" or "" when not scored
	Simulated bool
	// Back is the link to the run's report.
	Back string
}

// WriteHTML writes an example's trace as a page: every entry in time
// order, each task's calls and queries with their texts collapsed, all of
// it escaped (a prompt holds the data's text).
func WriteHTML(w io.Writer, x *Export, info PageInfo) error {
	type text struct {
		Label, Body string
		// ID anchors a long text's first appearance; Same links a later
		// one to it (a conversation repeats its earlier messages on
		// every call).
		ID, Same string
	}
	type step struct {
		At, Head, Class string
		Texts           []text
	}
	type entry struct {
		At, Head, Class, Error string
		Steps                  []step
		Lines                  []string
		Texts                  []text
	}
	var entries []entry
	t0 := x.Entries
	at := func(e *Entry) string { return clock(e.At.Sub(t0[0].At)) }
	mk := func(label, body string) text { return text{Label: label, Body: body} }
	seen := map[string]string{}
	mkT := func(label string, t Text) text {
		if t.Ref == "" {
			return mk(label, t.S)
		}
		if id, ok := seen[t.Ref]; ok {
			return text{Label: label, Same: id}
		}
		id := fmt.Sprintf("t%d", len(seen)+1)
		seen[t.Ref] = id
		return text{Label: label, Body: t.S, ID: id}
	}
	steps := func(ss []Step) []step {
		var out []step
		for _, s := range ss {
			st := step{At: clock(s.At.Sub(t0[0].At))}
			if c := s.LLM; c != nil {
				st.Class = "llm"
				st.Head = fmt.Sprintf("LLM %s · %s · %d → %d tokens · %s", c.Role, c.Model, c.Usage.PromptTokens, c.Usage.CompletionTokens, secs(s.Seconds))
				if c.Usage.RateLimited > 0 {
					st.Head += fmt.Sprintf(" · %d × 429", c.Usage.RateLimited)
				}
				if c.Finish != "" {
					st.Head += " · " + c.Finish
				}
				if c.Error != "" {
					st.Texts = append(st.Texts, mk("error", c.Error))
				}
				for _, m := range c.Messages {
					if m.Content.S != "" || len(m.ToolCalls) == 0 {
						st.Texts = append(st.Texts, mkT(m.Role, m.Content))
					}
					for _, tc := range m.ToolCalls {
						st.Texts = append(st.Texts, mk(m.Role+" called", tc.Name+" "+tc.Arguments))
					}
				}
				if c.Reasoning.S != "" {
					st.Texts = append(st.Texts, mkT("reasoning", c.Reasoning))
				}
				reply := c.Text.S
				for _, tc := range c.ToolCalls {
					reply += "\n→ " + tc.Name + " " + tc.Arguments
				}
				if reply != "" {
					st.Texts = append(st.Texts, mk("reply", strings.TrimPrefix(reply, "\n")))
				}
			}
			if q := s.Query; q != nil {
				st.Class = "query"
				st.Head = fmt.Sprintf("query %s · %s · %d row(s) · %s", q.Dialect, q.Status, q.Rows, secs(s.Seconds))
				st.Texts = append(st.Texts, mkT("sql", q.SQL))
				if q.Error != "" {
					st.Texts = append(st.Texts, mk("error", q.Error))
				}
				if q.Preview.S != "" {
					st.Texts = append(st.Texts, mk("rows", q.Preview.S))
				}
			}
			out = append(out, st)
		}
		return out
	}
	for _, e := range x.Entries {
		en := entry{At: at(e)}
		switch {
		case e.Start != nil:
			en.Class, en.Head = "start", fmt.Sprintf("start: round %d, %d task(s)", e.Start.Round, len(e.Start.Tasks))
			en.Steps = steps(e.Start.Steps)
		case e.Task != nil:
			t := e.Task
			en.Class = "task " + t.Outcome
			en.Head = fmt.Sprintf("task %s %s · round %d · %s pool · delivery %d · %s · %s · %s", t.Kind, t.ID, t.Round, t.Pool, t.Delivery,
				t.Outcome, secs(e.End.Sub(e.At).Seconds()), e.Process)
			en.Error = t.Error
			en.Steps = steps(t.Steps)
			for _, r := range t.Results {
				l := fmt.Sprintf("candidate %d: %s, %d row(s)", r.Index, r.Status, r.Rows)
				if r.Error != "" {
					l += " — " + r.Error
				}
				en.Lines = append(en.Lines, l)
				if r.SQL != "" {
					en.Texts = append(en.Texts, mk(fmt.Sprintf("candidate %d SQL", r.Index), r.SQL))
				}
			}
			if len(t.Next) > 0 {
				en.Lines = append(en.Lines, "continues in "+strings.Join(t.Next, ", "))
			}
		case e.Decision != nil:
			d := e.Decision
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
		case e.Final != nil:
			f := e.Final
			en.Class = "final"
			en.Head = fmt.Sprintf("answer: %s · %s · %s", f.Status, f.Confidence, f.Method)
			en.Error = f.Error
			if f.SQL != "" {
				en.Texts = append(en.Texts, text{Label: "final SQL", Body: f.SQL})
			}
		}
		entries = append(entries, en)
	}
	return tracePage.Execute(w, map[string]any{"X": x, "Info": info, "Entries": entries})
}

var tracePage = template.Must(template.New("trace").Parse(`<!doctype html>
<html lang="en"><head><meta charset="utf-8"><meta name="viewport" content="width=device-width, initial-scale=1">
<title>{{.X.Example}} — what the agent did</title>
<style>
body{font-family:system-ui,sans-serif;max-width:1100px;margin:1.5em auto;padding:0 1em;color:#222;line-height:1.4}
.sub{color:#666}.banner{background:#fff3cd;border:2px solid #d39e00;padding:.6em 1em;margin:1em 0;font-weight:bold}
ol.entries{list-style:none;padding:0}li.entry{border-left:4px solid #bbb;margin:.6em 0;padding:.2em .8em}
li.decision{border-color:#6f42c1}li.final{border-color:#198754}li.start{border-color:#0d6efd}li.retry,li.failed,li.lease_lost{border-color:#dc3545}
.at{font-family:monospace;color:#666;margin-right:.6em}.head{font-weight:600}
ol.steps{list-style:none;padding-left:1.2em}li.step{margin:.3em 0}li.llm .head{color:#0b5394}li.query .head{color:#7a4b00}
details{margin:.15em 0 .15em 1em}summary{cursor:pointer;color:#444}pre{white-space:pre-wrap;word-break:break-word;background:#f6f6f6;padding:.5em;margin:.2em 0;font-size:.85em;max-height:40em;overflow:auto}
.err{color:#b02a37;white-space:pre-wrap}.same{margin-left:1em;color:#666;font-size:.9em}.line{margin-left:1em;font-size:.95em}
</style></head><body>
<header><h1>{{.X.Example}}</h1>
<p class="sub">run <code>{{.X.Run}}</code>{{if .X.Agent}} · agent {{.X.Agent}}{{end}}{{if .X.Level}} · trace {{.X.Level}}{{end}}{{if .Info.Back}} · <a href="{{.Info.Back}}">back to the report</a>{{end}}</p>
{{if .Info.Simulated}}<div class="banner" role="alert">Simulated LLM: these prompts were answered by quorum's simulated LLM (llmsim), not a real model.</div>{{end}}
{{if .Info.Question}}<p id="question"><b>Question:</b> {{.Info.Question}}</p>{{end}}
{{if .Info.Status}}<p id="status"><b>Status:</b> {{.Info.Status}}{{if .Info.Correct}} · <b>{{.Info.Correct}}</b>{{end}}</p>{{end}}
</header>
{{if not .Entries}}<p>No trace was recorded for this example.</p>{{end}}
<ol class="entries" id="trace">
{{range .Entries}}<li class="entry {{.Class}}"><span class="at">{{.At}}</span><span class="head">{{.Head}}</span>
{{if .Error}}<div class="err">{{.Error}}</div>{{end}}
{{if .Steps}}<ol class="steps">{{range .Steps}}<li class="step {{.Class}}"><span class="at">{{.At}}</span><span class="head">{{.Head}}</span>
{{range .Texts}}{{if .Same}}<div class="same">{{.Label}}: the same text as <a href="#{{.Same}}">above</a></div>{{else}}<details{{if .ID}} id="{{.ID}}"{{end}}><summary>{{.Label}} ({{len .Body}} chars)</summary><pre>{{.Body}}</pre></details>{{end}}{{end}}</li>
{{end}}</ol>{{end}}
{{range .Lines}}<div class="line">{{.}}</div>{{end}}
{{range .Texts}}<details><summary>{{.Label}}</summary><pre>{{.Body}}</pre></details>{{end}}
</li>
{{end}}</ol>
<script>addEventListener("load",function(){document.body.setAttribute("data-ready","yes")});</script>
</body></html>
`))
