package trace

import (
	"bytes"
	"encoding/json"
	"errors"
	"html/template"
	"io"
	"os"
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
	p := newHTMLPage(x)
	var entries []pageEntry
	for _, e := range x.Entries {
		entries = append(entries, p.entry(e))
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
