package compare

import (
	"fmt"
	"html/template"
	"io"
	"os"
	"path/filepath"

	"github.com/quorumsql/quorum/pkg/outputs"
)

// WriteHTML writes diffs as one page: for each run against the base, what
// changed, what each cost, and every example that changed (all: every
// example), each linked to both runs' trace pages where they exist. dir
// is the folder the page is written to, for the links; the page loads
// nothing and runs no script.
func WriteHTML(w io.Writer, dir string, diffs []*Diff, all bool) error {
	type link struct{ Text, Href string }
	type row struct {
		ID, Base, Other, Calls, Tokens, Latency, What string
		Class                                         string
		Links                                         []link
	}
	type section struct {
		D     *Diff
		Gold  string
		Cost  [][4]string
		Rows  []row
		Empty bool
	}
	page := func(run, id string) string {
		p := filepath.Join(run, outputs.ExamplesDir, outputs.PageFile(id))
		if _, err := os.Stat(p); err != nil {
			return ""
		}
		if rel, err := filepath.Rel(dir, p); err == nil {
			return filepath.ToSlash(rel)
		}
		return p
	}
	var sections []section
	for _, d := range diffs {
		b, o := d.BaseTotals, d.OtherTotals
		sec := section{D: d, Cost: [][4]string{
			{"answered", fmt.Sprint(b.Answered), fmt.Sprint(o.Answered), ""},
			{"LLM calls", fmt.Sprint(b.LLMCalls), fmt.Sprint(o.LLMCalls), ratio(float64(o.LLMCalls), float64(b.LLMCalls))},
			{"prompt tokens", fmt.Sprint(b.PromptTokens), fmt.Sprint(o.PromptTokens), ratio(float64(o.PromptTokens), float64(b.PromptTokens))},
			{"completion tokens", fmt.Sprint(b.CompletionTokens), fmt.Sprint(o.CompletionTokens), ratio(float64(o.CompletionTokens), float64(b.CompletionTokens))},
			{"money", fmt.Sprintf("%.4f", b.Money), fmt.Sprintf("%.4f", o.Money), ratio(o.Money, b.Money)},
			{"latency p50 (s)", fmt.Sprintf("%.1f", b.LatencyP50), fmt.Sprintf("%.1f", o.LatencyP50), ratio(o.LatencyP50, b.LatencyP50)},
			{"latency p95 (s)", fmt.Sprintf("%.1f", b.LatencyP95), fmt.Sprintf("%.1f", o.LatencyP95), ratio(o.LatencyP95, b.LatencyP95)},
		}}
		be, bok := b.EX()
		oe, ook := o.EX()
		if bok || ook {
			sec.Gold = fmt.Sprintf("right→wrong %d, wrong→right %d; EX %s → %s", d.RightWrong, d.WrongRight, pct(be, bok, b), pct(oe, ook, o))
		} else {
			sec.Gold = "neither run was scored (no gold in its dataset)"
		}
		rows := d.Differing()
		if all {
			rows = d.Rows
		}
		for _, r := range rows {
			x := row{ID: r.ID, Base: outcome(r.Base), Other: outcome(r.Other), What: r.what(),
				Calls:   fmt.Sprintf("%d → %d", r.Base.LLMCalls, r.Other.LLMCalls),
				Tokens:  fmt.Sprintf("%d → %d", r.Base.PromptTokens+r.Base.CompletionTokens, r.Other.PromptTokens+r.Other.CompletionTokens),
				Latency: fmt.Sprintf("%.1f → %.1f", r.Base.LatencySeconds, r.Other.LatencySeconds)}
			switch r.Transition {
			case "right→wrong":
				x.Class = "worse"
			case "wrong→right":
				x.Class = "better"
			}
			for i, name := range []string{"base", "other"} {
				if href := page(d.dirs[i], r.ID); href != "" {
					x.Links = append(x.Links, link{Text: name + "'s trace", Href: href})
				}
			}
			sec.Rows = append(sec.Rows, x)
		}
		sec.Empty = len(sec.Rows) == 0
		sections = append(sections, sec)
	}
	return comparePage.Execute(w, map[string]any{"Sections": sections, "All": all})
}

var comparePage = template.Must(template.New("compare").Parse(`<!doctype html>
<html lang="en"><head><meta charset="utf-8"><meta name="viewport" content="width=device-width, initial-scale=1">
<meta http-equiv="Content-Security-Policy" content="default-src 'none'; style-src 'unsafe-inline'">
<title>quorum compare</title>
<style>
body { font: 15px/1.45 system-ui, sans-serif; margin: 1.5rem; color: #1d1d1f; max-width: 72rem; }
table { border-collapse: collapse; margin: .6rem 0 1.2rem; }
th, td { border-bottom: 1px solid #ddd; padding: .25rem .7rem; text-align: left; vertical-align: top; }
td.n { text-align: right; font-variant-numeric: tabular-nums; }
tr.worse td { background: #fde8e8; } tr.better td { background: #e6f4ea; }
.warn { color: #8a4b00; } code { font-size: 13px; }
</style></head><body>
<h1>Runs compared</h1>
{{range .Sections}}<section>
<h2>{{.D.Other}}</h2>
<p>against the base <code>{{.D.Base}}</code></p>
{{range .D.Warnings}}<p class="warn">warning: {{.}}</p>{{end}}
<p><strong>{{.D.Changed}} of {{.D.Common}} answers changed</strong> (status or result table); {{.D.SQLOnly}} more with other SQL and the same result.
{{if or .D.OnlyBase .D.OnlyOther}}{{len .D.OnlyBase}} examples are in the base only and {{len .D.OnlyOther}} in the other only; the figures are over the {{.D.Common}} in both.{{end}}</p>
<p>Gold: {{.Gold}}</p>
<table><tr><th></th><th>base</th><th>other</th><th>ratio</th></tr>
{{range .Cost}}<tr><th>{{index . 0}}</th><td class="n">{{index . 1}}</td><td class="n">{{index . 2}}</td><td class="n">{{index . 3}}</td></tr>{{end}}
</table>
{{if .Empty}}<p>No example's answer, SQL or judgement changed.</p>{{else}}
<table><tr><th>example</th><th>base</th><th>other</th><th>calls</th><th>tokens</th><th>latency (s)</th><th>changed</th><th>traces</th></tr>
{{range .Rows}}<tr class="{{.Class}}"><td>{{.ID}}</td><td>{{.Base}}</td><td>{{.Other}}</td><td class="n">{{.Calls}}</td><td class="n">{{.Tokens}}</td><td class="n">{{.Latency}}</td><td>{{.What}}</td><td>{{range .Links}}<a href="{{.Href}}">{{.Text}}</a> {{end}}</td></tr>
{{end}}</table>{{end}}
</section>{{end}}
</body></html>
`))
