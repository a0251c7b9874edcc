package outputs

import (
	"cmp"
	"crypto/sha256"
	_ "embed"
	"encoding/base64"
	"fmt"
	"html/template"
	"io"
	"maps"
	"math"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/quorumsql/quorum/pkg/cost"
)

// Extra is what a caller (quorum bench) adds to a run's report.
type Extra struct {
	// Title is appended to the page's title.
	Title string
	// Rows are appended to the summary table.
	Rows []Row
	// Lead sections come before the run's own (a comparison of runs);
	// Sections follow them.
	Lead, Sections []Section
	// Pages are the examples with a trace page (examples/<id>.html),
	// which the report links.
	Pages map[string]bool
	// Dir is the run's output folder: the table of examples shows each
	// answered example's SQL and first result rows from it ("": none).
	Dir string
}

// ExamplesDir holds the trace pages of the examples a report links.
const ExamplesDir = "examples"

// PageFile is the file of an example's trace page inside ExamplesDir.
func PageFile(id string) string { return id + ".html" }

// topExamples are the 10 examples with the largest key.
func topExamples(r *Report, key func(Example) float64) []Example {
	ex := slices.Clone(r.Examples)
	sort.SliceStable(ex, func(i, j int) bool { return key(ex[i]) > key(ex[j]) })
	return ex[:min(10, len(ex))]
}

func latencyOf(e Example) float64 { return e.LatencySeconds }
func tokensOf(e Example) float64  { return float64(e.Cost.Tokens()) }

// Linked are the examples a report lists by name, which get a page of
// their trace: the slowest, the most expensive, the failed and the wrong.
func Linked(r *Report) []string {
	var ids []string
	for _, e := range topExamples(r, latencyOf) {
		ids = append(ids, e.InstanceID)
	}
	for _, e := range topExamples(r, tokensOf) {
		ids = append(ids, e.InstanceID)
	}
	for _, e := range r.Examples {
		if e.Status == "failed" || e.Correct != nil && !*e.Correct {
			ids = append(ids, e.InstanceID)
		}
	}
	slices.Sort(ids)
	return slices.Compact(ids)
}

// Bars is a horizontal bar chart (inline SVG), for a caller's sections;
// its value axis is labelled by unit ("%": percent).
func Bars(title, unit string, labels []string, values []float64) template.HTML {
	axis := ""
	if unit == "%" {
		axis = "percent"
	}
	return svgBars(title, axis, unit, barsOf(labels, values))
}

// Row is one line of a two-column table.
type Row struct{ Label, Value string }

// Section is a <section id=ID> with an <h2>Heading</h2>; HTML is trusted
// markup the caller built (escape what it holds).
type Section struct {
	ID, Heading string
	HTML        template.HTML
}

// bar is one bar of a chart.
type bar struct {
	Label string
	Value float64
}

// ticks are round values from 0 to at least hi (about five steps of 1, 2
// or 5 times a power of ten), for an axis.
func ticks(hi float64) []float64 {
	if hi <= 0 {
		hi = 1
	}
	raw := hi / 5
	p := math.Pow(10, math.Floor(math.Log10(raw)))
	step := 10 * p
	for _, m := range []float64{1, 2, 5} {
		if m*p >= raw {
			step = m * p
			break
		}
	}
	var out []float64
	for i := 0; ; i++ {
		v := float64(i) * step
		out = append(out, math.Round(v*1e9)/1e9)
		if v >= hi-1e-9 {
			return out
		}
	}
}

// svgBars draws a horizontal bar chart with a value axis below the bars:
// tick marks, their values and the axis's name (axis; "" for none).
func svgBars(title, axis, unit string, bars []bar) template.HTML {
	if len(bars) == 0 {
		return ""
	}
	maxV := 0.0
	for _, b := range bars {
		maxV = math.Max(maxV, b.Value)
	}
	ts := ticks(maxV)
	top := ts[len(ts)-1]
	const w, rowH, labelW, right = 640, 22, 200, 70
	plotW := float64(w - labelW - right)
	y0 := 24 + rowH*len(bars) // the value axis
	h := y0 + 40
	var s strings.Builder
	fmt.Fprintf(&s, `<svg class="chart" xmlns="http://www.w3.org/2000/svg" width="%d" height="%d" viewBox="0 0 %d %d" role="img" aria-label="%s">`, w, h, w, h, template.HTMLEscapeString(title))
	fmt.Fprintf(&s, `<text x="0" y="14" font-weight="bold">%s</text>`, template.HTMLEscapeString(title))
	// Grid lines at the ticks, under the bars.
	for _, v := range ts[1:] {
		x := float64(labelW) + plotW*v/top
		fmt.Fprintf(&s, `<line x1="%.1f" y1="22" x2="%.1f" y2="%d" stroke="#e4e4e4"/>`, x, x, y0)
	}
	for i, b := range bars {
		y := 24 + i*rowH
		bw := plotW * b.Value / top
		// Long labels (database names) would run into the bars.
		label := b.Label
		if r := []rune(label); len(r) > 28 {
			label = string(r[:27]) + "…"
		}
		fmt.Fprintf(&s, `<text x="0" y="%d" font-size="12"><title>%s</title>%s</text>`, y+14, template.HTMLEscapeString(b.Label), template.HTMLEscapeString(label))
		fmt.Fprintf(&s, `<rect x="%d" y="%d" width="%.1f" height="%d" fill="#4c78a8"/>`, labelW, y+2, bw, rowH-6)
		fmt.Fprintf(&s, `<text x="%.1f" y="%d" font-size="12">%s%s</text>`, float64(labelW)+bw+4, y+14, trim(b.Value), unit)
	}
	fmt.Fprintf(&s, `<g class="axis x" stroke="#555"><line x1="%d" y1="22" x2="%d" y2="%d"/><line x1="%d" y1="%d" x2="%.1f" y2="%d"/>`, labelW, labelW, y0, labelW, y0, float64(labelW)+plotW, y0)
	for _, v := range ts {
		x := float64(labelW) + plotW*v/top
		fmt.Fprintf(&s, `<line class="tick" x1="%.1f" y1="%d" x2="%.1f" y2="%d"/>`, x, y0, x, y0+5)
	}
	s.WriteString(`</g>`)
	for _, v := range ts {
		x := float64(labelW) + plotW*v/top
		fmt.Fprintf(&s, `<text class="tick-label" x="%.1f" y="%d" font-size="11" text-anchor="middle">%s%s</text>`, x, y0+17, trim(v), unit)
	}
	if axis != "" {
		fmt.Fprintf(&s, `<text class="axis-label" x="%.1f" y="%d" font-size="12" text-anchor="middle">%s</text>`, float64(labelW)+plotW/2, y0+34, template.HTMLEscapeString(axis))
	}
	s.WriteString(`</svg>`)
	return template.HTML(s.String())
}

// svgLine draws a line of points (x ascending) on axes from zero, with
// tick marks, their values and each axis's name.
func svgLine(title, xLabel, yLabel string, xs, ys []float64) template.HTML {
	if len(xs) < 2 {
		return ""
	}
	const w, h, left, right, topPad, bottom = 640, 260, 64, 24, 30, 48
	maxY := 0.0
	for _, y := range ys {
		maxY = math.Max(maxY, y)
	}
	xt, yt := ticks(xs[len(xs)-1]), ticks(maxY)
	maxX, topY := xt[len(xt)-1], yt[len(yt)-1]
	pw, ph := float64(w-left-right), float64(h-topPad-bottom)
	px := func(x float64) float64 { return left + pw*x/maxX }
	py := func(y float64) float64 { return topPad + ph - ph*y/topY }
	var pts []string
	for i := range xs {
		pts = append(pts, fmt.Sprintf("%.1f,%.1f", px(xs[i]), py(ys[i])))
	}
	var s strings.Builder
	fmt.Fprintf(&s, `<svg class="chart" xmlns="http://www.w3.org/2000/svg" width="%d" height="%d" viewBox="0 0 %d %d" role="img" aria-label="%s">`, w, h, w, h, template.HTMLEscapeString(title))
	fmt.Fprintf(&s, `<text x="0" y="14" font-weight="bold">%s</text>`, template.HTMLEscapeString(title))
	for _, v := range yt[1:] {
		fmt.Fprintf(&s, `<line x1="%d" y1="%.1f" x2="%.1f" y2="%.1f" stroke="#e4e4e4"/>`, left, py(v), px(maxX), py(v))
	}
	fmt.Fprintf(&s, `<g class="axis" stroke="#555"><line x1="%d" y1="%.1f" x2="%.1f" y2="%.1f"/><line x1="%d" y1="%d" x2="%d" y2="%.1f"/>`,
		left, py(0), px(maxX), py(0), left, topPad, left, py(0))
	for _, v := range xt {
		fmt.Fprintf(&s, `<line class="tick" x1="%.1f" y1="%.1f" x2="%.1f" y2="%.1f"/>`, px(v), py(0), px(v), py(0)+5)
	}
	for _, v := range yt {
		fmt.Fprintf(&s, `<line class="tick" x1="%d" y1="%.1f" x2="%d" y2="%.1f"/>`, left-5, py(v), left, py(v))
	}
	s.WriteString(`</g>`)
	for _, v := range xt {
		fmt.Fprintf(&s, `<text class="tick-label" x="%.1f" y="%.1f" font-size="11" text-anchor="middle">%s</text>`, px(v), py(0)+17, trim(v))
	}
	for _, v := range yt {
		fmt.Fprintf(&s, `<text class="tick-label" x="%d" y="%.1f" font-size="11" text-anchor="end">%s</text>`, left-8, py(v)+4, trim(v))
	}
	fmt.Fprintf(&s, `<polyline fill="none" stroke="#f58518" stroke-width="2" points="%s"/>`, strings.Join(pts, " "))
	fmt.Fprintf(&s, `<text class="axis-label" x="%.1f" y="%d" font-size="12" text-anchor="middle">%s</text>`, left+pw/2, h-6, template.HTMLEscapeString(xLabel))
	fmt.Fprintf(&s, `<text class="axis-label" x="14" y="%.1f" font-size="12" text-anchor="middle" transform="rotate(-90 14 %.1f)">%s</text>`,
		topPad+ph/2, topPad+ph/2, template.HTMLEscapeString(yLabel))
	s.WriteString(`</svg>`)
	return template.HTML(s.String())
}

// trim writes v with at most two decimals and no trailing zeros.
func trim(v float64) string {
	if v == math.Trunc(v) && math.Abs(v) < 1e15 {
		return num(int(v))
	}
	return strings.TrimRight(strings.TrimRight(fmt.Sprintf("%.2f", v), "0"), ".")
}

// histogram buckets values into n bins.
func histogram(vals []float64, n int, unit string) []bar {
	if len(vals) == 0 {
		return nil
	}
	s := append([]float64(nil), vals...)
	sort.Float64s(s)
	lo, hi := s[0], s[len(s)-1]
	if hi == lo {
		return []bar{{Label: trim(lo) + unit, Value: float64(len(s))}}
	}
	// Counts (LLM calls) get whole-number buckets, one per value when few.
	if lo == math.Trunc(lo) && !slices.ContainsFunc(s, func(v float64) bool { return v != math.Trunc(v) }) {
		width := math.Ceil((hi - lo + 1) / float64(n))
		var out []bar
		for b := lo; b <= hi; b += width {
			l := trim(b) + unit
			if width > 1 {
				l = fmt.Sprintf("%s–%s%s", trim(b), trim(b+width-1), unit)
			}
			out = append(out, bar{Label: l})
		}
		for _, v := range s {
			out[int((v-lo)/width)].Value++
		}
		return out
	}
	width := (hi - lo) / float64(n)
	out := make([]bar, n)
	for i := range out {
		out[i].Label = fmt.Sprintf("%s–%s%s", trim(lo+float64(i)*width), trim(lo+float64(i+1)*width), unit)
	}
	for _, v := range s {
		i := min(n-1, int((v-lo)/width))
		out[i].Value++
	}
	return out
}

// num writes n with thousands separators.
func num(n int) string {
	s := fmt.Sprint(n)
	if n < 0 {
		return "-" + num(-n)
	}
	for i := len(s) - 3; i > 0; i -= 3 {
		s = s[:i] + "," + s[i:]
	}
	return s
}

// secs writes a duration in seconds the way a reader says it.
func secs(s float64) string {
	d := time.Duration(s * float64(time.Second))
	switch {
	case s > 0 && s < 1:
		return fmt.Sprintf("%.0f ms", s*1000)
	case s < 60:
		return fmt.Sprintf("%.1f s", s)
	case s < 3600:
		return fmt.Sprintf("%dm %02ds", int(d.Minutes()), int(d.Seconds())%60)
	default:
		return fmt.Sprintf("%dh %02dm", int(d.Hours()), int(d.Minutes())%60)
	}
}

// money shows an amount at the endpoints' prices; small amounts keep
// their cents' fractions, since one call may cost a thousandth.
func money(v float64) string {
	if v >= 100 {
		return fmt.Sprintf("%.2f", v)
	}
	return fmt.Sprintf("%.4f", v)
}

func pct(n, of int) string {
	if of == 0 {
		return "–"
	}
	return fmt.Sprintf("%.1f%%", 100*float64(n)/float64(of))
}

func stamp(t time.Time) string {
	if t.IsZero() {
		return "–"
	}
	return t.Format("2006-01-02 15:04:05 MST")
}

// exampleRow is a line of the slowest and most expensive tables.
type exampleRow struct {
	ID, Status, Latency, Calls, Tokens string
	// Page links the example's trace page, when there is one.
	Page string
}

type stageRow struct {
	Stage, Calls, Prompt, Completion, Queries, QueryTime, Share, Money string
}

type costRow struct{ Label, Total, PerExample string }

// sessionRow is a line of the sessions table.
type sessionRow struct{ N, Started, Ended, Duration, Examples string }

// sessionRows are a resumed run's sessions (none for a run of one).
func sessionRows(r *Report) []sessionRow {
	if len(r.Sessions) < 2 {
		return nil
	}
	var out []sessionRow
	for _, s := range r.Sessions {
		ended := stamp(s.Finished)
		if s.EndUnknown {
			ended += " (last seen: its process died)"
		}
		out = append(out, sessionRow{N: fmt.Sprint(s.Number), Started: stamp(s.Started), Ended: ended, Duration: secs(s.Seconds), Examples: num(s.Examples)})
	}
	return out
}

// runningSeconds is the time the run had been running at f seconds after
// its start: the pauses between its sessions left out, so a resumed run's
// throughput is not diluted by the time nothing ran.
func runningSeconds(r *Report, f float64) float64 {
	if len(r.Sessions) < 2 {
		return f
	}
	at := r.Started.Add(time.Duration(f * float64(time.Second)))
	ran := 0.0
	for _, s := range r.Sessions {
		if at.Before(s.Started) {
			break // in a pause: where the session before ended
		}
		if !at.After(s.Finished) {
			return ran + at.Sub(s.Started).Seconds()
		}
		ran += s.Seconds
	}
	return ran
}

// statusRow is a line of the status table.
type statusRow struct{ Label, Count, Share string }

// The report's style and script, inline so the page stands alone.
var (
	//go:embed report.css
	reportCSS string
	//go:embed report.js
	reportJS string
)

// reportCSP is the page's policy: nothing loads from anywhere, and only
// its own style and script (by their hashes) run, so markup that slipped
// into a question or a cell could not execute.
var reportCSP = "default-src 'none'; script-src '" + cspHash(reportJS) + "'; style-src '" + cspHash(reportCSS) +
	"'; img-src data:; base-uri 'none'; form-action 'none'"

func cspHash(s string) string {
	h := sha256.Sum256([]byte(s))
	return "sha256-" + base64.StdEncoding.EncodeToString(h[:])
}

var page = template.Must(template.New("report").Parse(`<!doctype html>
<html lang="en"><head><meta charset="utf-8">
<meta http-equiv="Content-Security-Policy" content="{{.CSP}}">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>{{.Title}} — quorum report</title>
<style>{{.CSS}}</style>
</head><body>
<header><h1>{{.Title}}</h1><p class="sub">run <code>{{.RunID}}</code> · {{.When}}</p></header>

{{range .Lead}}<section id="{{.ID}}"><h2>{{.Heading}}</h2>
{{.HTML}}
</section>{{end}}

<section id="scenario"><h2>Scenario</h2>
{{if .Simulated}}<div class="banner" id="simulated-banner" role="alert">Simulated LLM: the answers in this run came from quorum's simulated LLM (llmsim), not a real model. The accuracy figures below are the simulator's, not a model's.</div>{{end}}
{{range .Warnings}}<div class="banner warning" role="alert">Warning: {{.}}</div>{{end}}
<table class="kv">{{range .Scenario}}<tr><th>{{.Label}}</th><td>{{.Value}}</td></tr>{{end}}</table>
</section>

<section id="summary"><h2>Summary</h2>
<table class="kv">{{range .Summary}}<tr><th>{{.Label}}</th><td>{{.Value}}</td></tr>{{end}}</table>
</section>

{{if .Sessions}}<section id="sessions"><h2>Sessions ({{len .Sessions}})</h2>
<p>The run was interrupted and resumed: each session ran from a start to an interruption, a crash or the end. The wall time is their sum; latencies and finish times are the examples' own, whichever session recorded them.</p>
<table><tr><th>session</th><th class="l">started</th><th class="l">ended</th><th>duration</th><th>examples finished</th></tr>
{{range .Sessions}}<tr><td>{{.N}}</td><td class="l">{{.Started}}</td><td class="l">{{.Ended}}</td><td>{{.Duration}}</td><td>{{.Examples}}</td></tr>{{end}}</table>
</section>{{end}}

<section id="accuracy"><h2>Accuracy</h2>
{{if .Scored}}<div class="tiles">
<div class="tile"><b>EX {{.EX}}</b><span>Share of the {{.ScoredN}} scored examples whose final answer matches the gold result, compared as {{.Metric}} does.</span></div>
<div class="tile"><b>{{.KName}} {{.EXAtK}}</b><span>Share of the scored examples where any of the example's candidates matched the gold result (what a perfect vote would reach); k = {{.KRange}} candidates drawn per example, every round's.</span></div>
</div>{{else}}<p>Not scored: the dataset has no gold results for these examples.</p>{{end}}
<table><tr><th>status</th><th>examples</th><th>share</th></tr>{{range .Status}}<tr><td>{{.Label}}</td><td>{{.Count}}</td><td>{{.Share}}</td></tr>{{end}}</table>
{{range .AccCharts}}{{.}}{{end}}
</section>

<section id="calibration"><h2>Accuracy by confidence and by method</h2>
{{if .Scored}}<p>How often the final answer was right at each confidence and with each method that chose it, over the {{.ScoredN}} examples with gold; examples without gold are left out ({{.Unscored}} here). "none": no answer or failed.</p>
<table id="by-confidence"><tr><th class="l">confidence</th><th>examples</th><th>right</th><th>EX</th></tr>
{{range .ByConfidence}}<tr><td class="l">{{.Value}}</td><td>{{.Examples}}</td><td>{{.Correct}}</td><td>{{printf "%.3f" .EX}}</td></tr>{{end}}</table>
<table id="by-method"><tr><th class="l">method</th><th>examples</th><th>right</th><th>EX</th></tr>
{{range .ByMethod}}<tr><td class="l">{{.Value}}</td><td>{{.Examples}}</td><td>{{.Correct}}</td><td>{{printf "%.3f" .EX}}</td></tr>{{end}}</table>
{{else}}<p>Not scored: no example has gold, so there is no accuracy by confidence or by method.</p>{{end}}
</section>

<section id="examples"><h2>Every example ({{len .Table.Rows}})</h2>
<p>Click a column's name to sort by it (again to reverse), an example to open its SQL, the first rows of its result, how it compared with the gold result and what the agent did.</p>
<div class="filters" role="search">
<label>Show <select id="ex-show"><option value="all">all</option><option value="wrong">wrong</option><option value="right">right</option><option value="failed">failed</option><option value="no_answer">no answer</option><option value="low">low confidence</option></select></label>
<label>Dialect <select id="ex-dialect"><option value="*">all</option>{{range .Dialects}}<option value="{{.}}">{{if .}}{{.}}{{else}}unknown{{end}}</option>{{end}}</select></label>
<label>Database <select id="ex-db"><option value="*">all</option>{{range .Databases}}<option value="{{.}}">{{if .}}{{.}}{{else}}unknown{{end}}</option>{{end}}</select></label>
<label>Text <input id="ex-text" type="search" placeholder="id, question, SQL, error"></label>
<span id="ex-count" role="status" aria-live="polite"></span>
</div>
<table id="ex-table"><thead><tr><th aria-sort="none"><button type="button" data-key="id">example</button></th><th class="l"><button type="button" data-key="q">question</button></th><th class="l"><button type="button" data-key="db">database</button></th><th class="l"><button type="button" data-key="dialect">dialect</button></th><th class="l"><button type="button" data-key="status">status</button></th><th class="l"><button type="button" data-key="conf">confidence</button></th><th class="l"><button type="button" data-key="method">method</button></th><th class="l"><button type="button" data-key="correct">correct</button></th><th><button type="button" data-key="calls">LLM calls</button></th><th><button type="button" data-key="tokens">tokens</button></th>{{if .Table.Priced}}<th><button type="button" data-key="money">money</button></th>{{end}}<th><button type="button" data-key="latency">latency</button></th></tr></thead>
<tbody id="ex-body"></tbody></table>
</section>

<section id="confidence"><h2>Confidence</h2>
<p>{{.HighConf}} high-confidence and {{.LowConf}} low-confidence answers. Confidence is the first vote's: high when a unique largest group of at least two candidates agreed; a low-confidence example goes on to the agent's further steps (for ReFoRCE, exploration and another round). The chart counts examples by that confidence and the method that chose the final answer (none: no answer or failed).</p>
{{.ConfChart}}
</section>

<section id="cost"><h2>Cost</h2>
<table><tr><th></th><th>total</th><th>per example</th></tr>{{range .CostTotals}}<tr><td>{{.Label}}</td><td>{{.Total}}</td><td>{{.PerExample}}</td></tr>{{end}}</table>
{{if .Stages}}<h3>By stage (summed over examples)</h3>
<table><tr><th>stage</th><th>LLM calls</th><th>prompt tokens</th><th>completion tokens</th><th>share of tokens</th><th>money</th><th>warehouse queries</th><th>warehouse time</th></tr>
{{range .Stages}}<tr><td>{{.Stage}}</td><td>{{.Calls}}</td><td>{{.Prompt}}</td><td>{{.Completion}}</td><td>{{.Share}}</td><td>{{.Money}}</td><td>{{.Queries}}</td><td>{{.QueryTime}}</td></tr>{{end}}</table>
{{.StageChart}}{{else}}<p>No cost by stage recorded.</p>{{end}}
</section>

<section id="latency"><h2>Latency</h2>
<p>{{.LatencyNote}}</p>
{{range .LatCharts}}{{.}}{{end}}
</section>

<section id="slowest"><h2>Slowest examples</h2>
{{template "examples" .Slowest}}
</section>

<section id="expensive"><h2>Most expensive examples (tokens)</h2>
{{template "examples" .Expensive}}
</section>

{{if .Members}}<section id="members"><h2>Ensemble members (rule {{.Rule}})</h2>
<p>Each member decided with its own rule before the ensemble combined them. "Right when the ensemble was wrong" counts the examples a member alone would have got right; "wrong when the ensemble was right" those the ensemble rescued.</p>
<table><tr><th>member</th><th>answered</th><th>agrees with the ensemble</th><th>EX</th><th>right when the ensemble was wrong</th><th>wrong when the ensemble was right</th></tr>
{{range .Members}}<tr><td>{{.Agent}}</td><td>{{.Answered}}</td><td>{{.Agrees}}</td><td>{{.EX}}</td><td>{{.RightAlone}}</td><td>{{.Rescued}}</td></tr>{{end}}</table>
{{.MemberChart}}
</section>{{end}}

{{if .Wrong}}<section id="wrong"><h2>Wrong answers ({{len .Wrong}})</h2>
<p>Answered, but not the gold result. Each links to what the agent did.</p>
{{template "examples" .Wrong}}
</section>{{end}}

{{if .Failed}}<section id="failed"><h2>Failed examples ({{len .Failed}})</h2>
<table><tr><th>example</th><th class="l">error</th></tr>{{range $i, $e := .Failed}}<tr><td>{{with index $.FailedRows $i}}{{template "id" .}}{{end}}</td><td class="err">{{$e.Error}}</td></tr>{{end}}</table>
</section>{{end}}

{{range .Sections}}<section id="{{.ID}}"><h2>{{.Heading}}</h2>
{{.HTML}}
</section>{{end}}

<script type="application/json" id="examples-data">{{.TableJSON}}</script>
<script>{{.JS}}</script>
</body></html>
{{define "examples"}}<table><tr><th>example</th><th class="l">status</th><th>latency</th><th>LLM calls</th><th>tokens</th></tr>
{{range .}}<tr><td>{{template "id" .}}</td><td class="l">{{.Status}}</td><td>{{.Latency}}</td><td>{{.Calls}}</td><td>{{.Tokens}}</td></tr>{{end}}</table>{{end}}
{{define "id"}}{{if .Page}}<a href="{{.Page}}"><code>{{.ID}}</code></a>{{else}}<code>{{.ID}}</code>{{end}}{{end}}
`))

// memberRow is one ensemble member's record over a run.
type memberRow struct {
	Agent, Answered, Agrees, EX string
	RightAlone, Rescued         int
	share                       float64
}

// MemberStats counts, for one member of an ensemble run, the examples it
// answered, agreed with the ensemble on, got right, got right when the
// ensemble was wrong, and got wrong when the ensemble was right.
type MemberStats struct {
	Agent                                          string
	Examples, Answered, Agrees, Scored, Correct    int
	RightWhenEnsembleWrong, WrongWhenEnsembleRight int
}

// Members summarises the member decisions of an ensemble run, in member
// order.
func Members(r *Report) []MemberStats {
	var out []MemberStats
	at := map[string]int{}
	for _, e := range r.Examples {
		for _, m := range e.Members {
			i, ok := at[m.Agent]
			if !ok {
				i = len(out)
				at[m.Agent] = i
				out = append(out, MemberStats{Agent: m.Agent})
			}
			s := &out[i]
			s.Examples++
			if m.Status == "answered" {
				s.Answered++
			}
			if m.Agrees {
				s.Agrees++
			}
			if m.Correct != nil && e.Correct != nil {
				s.Scored++
				switch {
				case *m.Correct && !*e.Correct:
					s.RightWhenEnsembleWrong++
				case !*m.Correct && *e.Correct:
					s.WrongWhenEnsembleRight++
				}
				if *m.Correct {
					s.Correct++
				}
			}
		}
	}
	return out
}

func memberRows(r *Report) []memberRow {
	var out []memberRow
	for _, s := range Members(r) {
		row := memberRow{Agent: s.Agent, Answered: num(s.Answered) + " of " + num(s.Examples), Agrees: num(s.Agrees),
			EX: "–", RightAlone: s.RightWhenEnsembleWrong, Rescued: s.WrongWhenEnsembleRight}
		if s.Scored > 0 {
			row.share = 100 * float64(s.Correct) / float64(s.Scored)
			row.EX = fmt.Sprintf("%.1f%%", row.share)
		}
		out = append(out, row)
	}
	return out
}

func barsOf(labels []string, values []float64) []bar {
	out := make([]bar, len(labels))
	for i := range labels {
		out[i] = bar{Label: labels[i], Value: values[i]}
	}
	return out
}

// metricName names the evaluator whose rules scored the run's examples.
func metricName(r *Report) string {
	seen := map[string]bool{}
	for _, e := range r.Examples {
		if e.Correct != nil {
			seen[cmp.Or(e.Metric, "spider2")] = true
		}
	}
	switch {
	case seen["bird"] && seen["spider2"]:
		return "Spider 2.0's evaluator (examples with gold CSVs) or BIRD's execution accuracy (examples with gold SQL only)"
	case seen["bird"]:
		return "BIRD's execution accuracy (the sets of rows)"
	}
	return "Spider 2.0's evaluator"
}

// WriteHTML renders r as a self-contained HTML page (inline SVG charts,
// no external resources), with what extra adds when it is not nil.
func WriteHTML(w io.Writer, r *Report, extra *Extra) error {
	if extra == nil {
		extra = &Extra{}
	}
	t := r.Totals
	title, when := heading(r, extra)
	wall := wallRows(r)
	agg := aggregate(r)
	throughputAxis := "seconds since start"
	if len(r.Sessions) > 1 {
		throughputAxis = "seconds of running (pauses between sessions left out)"
	}
	xs, ys := throughput(agg.finished)
	latNote := latencyNote(agg.lat, len(xs))
	wrong, failedRows := exampleRows(r, extra, agg.failed)
	table := exampleTable(r, extra.Dir, extra.Pages)
	tableJSON, err := tableJSON(table)
	if err != nil {
		return err
	}
	dialects, dbs := dialectsAndDatabases(r)
	top := func(key func(Example) float64) []exampleRow {
		var out []exampleRow
		for _, e := range topExamples(r, key) {
			out = append(out, rowOf(e, extra))
		}
		return out
	}
	stageRows, stageBars := stageRowsOf(agg.stages)
	data := map[string]any{
		"CSS": template.CSS(reportCSS), "JS": template.JS(reportJS), "CSP": reportCSP,
		"Table": table, "TableJSON": template.JS(tableJSON), "Dialects": dialects, "Databases": dbs,
		"Title": title, "RunID": r.RunID, "When": when, "Simulated": strings.Contains(strings.ToUpper(r.LLM), "SIMULATED"),
		"Scenario": scenarioRows(r, wall), "Summary": append(append(summaryRows(r), wall...), extra.Rows...),
		"Scored": t.EX != nil, "ScoredN": t.Scored, "KName": t.EXAtKName(r.Votes), "KRange": t.KRange(r.Votes),
		"Unscored": t.Examples - t.Scored, "ByConfidence": t.ByConfidence, "ByMethod": t.ByMethod, "Metric": metricName(r), "Warnings": r.Warnings,
		"Status": []statusRow{{"answered", num(t.Answered), pct(t.Answered, t.Examples)},
			{"no answer (no candidate produced rows)", num(t.NoAnswer), pct(t.NoAnswer, t.Examples)},
			{"failed (the pipeline failed)", num(t.Failed), pct(t.Failed, t.Examples)}},
		"AccCharts": []template.HTML{svgBars("Accuracy by dialect", "examples right (percent)", "%", accuracyBars(agg.byDialect)), svgBars("Accuracy by database", "examples right (percent)", "%", accuracyBars(agg.byDB))},
		"HighConf":  t.HighConf, "LowConf": t.LowConf,
		"ConfChart":  svgBars("Examples by confidence → final method", "examples", "", agg.confBars()),
		"CostTotals": costRows(r), "Stages": stageRows, "StageChart": svgBars("Tokens by stage", "tokens (prompt and completion)", "", stageBars),
		"LatencyNote": latNote,
		"LatCharts": []template.HTML{svgBars("Example latency (examples per bucket)", "examples", "", histogram(agg.lat, 8, " s")),
			svgBars("LLM calls per example (examples per bucket)", "examples", "", histogram(agg.calls, 8, "")),
			svgLine("Throughput over time", throughputAxis, "examples finished", xs, ys)},
		"Sessions":  sessionRows(r),
		"Slowest":   top(latencyOf),
		"Expensive": top(tokensOf),
		"Failed":    agg.failed, "FailedRows": failedRows, "Wrong": wrong, "Sections": extra.Sections, "Lead": extra.Lead,
	}
	addMembers(data, r)
	if t.EX != nil {
		data["EX"], data["EXAtK"] = fmt.Sprintf("%.1f%%", 100**t.EX), fmt.Sprintf("%.1f%%", 100**t.EXAtK)
	}
	return page.Execute(w, data)
}

// heading is the page's title and when the run ran.
func heading(r *Report, extra *Extra) (title, when string) {
	ds := "an unnamed dataset"
	if r.Dataset != "" {
		ds = filepath.Base(filepath.Clean(r.Dataset))
	}
	title = cmp.Or(r.Agent, "quorum") + " on " + ds
	if extra.Title != "" {
		title += " — " + extra.Title
	}
	when = stamp(r.Started)
	if !r.Finished.IsZero() {
		when += " to " + stamp(r.Finished)
	}
	if len(r.Sessions) > 1 {
		when += fmt.Sprintf(" in %d sessions", len(r.Sessions))
	}
	return title, when
}

// wallRows is the run's wall time: a resumed run's is its sessions' sum,
// and the span, pauses included, is said beside it so neither is mistaken
// for the other.
func wallRows(r *Report) []Row {
	t := r.Totals
	if len(r.Sessions) > 1 {
		return []Row{{fmt.Sprintf("wall time (sum of its %d sessions)", len(r.Sessions)), secs(t.WallSeconds)},
			{"span (first start to last end, pauses included)", secs(t.SpanSeconds)}}
	}
	return []Row{{"wall time", secs(t.WallSeconds)}}
}

// scenarioRows say what ran: the dataset, agent and settings, when, the
// LLM and what wrote the report.
func scenarioRows(r *Report, wall []Row) []Row {
	t := r.Totals
	agent := cmp.Or(r.Agent, "quorum")
	opts := "defaults"
	if len(r.AgentOptions) > 0 {
		var kv []string
		for _, k := range slices.Sorted(maps.Keys(r.AgentOptions)) {
			kv = append(kv, k+"="+r.AgentOptions[k])
		}
		opts = strings.Join(kv, ", ")
	}
	scenario := []Row{
		{"dataset", cmp.Or(r.Dataset, "–")}, {"agent", agent}, {"agent options", opts},
		{"votes (candidates per example)", fmt.Sprint(r.Votes)}, {"seed", fmt.Sprint(r.Seed)},
		{"examples", fmt.Sprint(t.Examples)}, {"started", stamp(r.Started)}, {"finished", stamp(r.Finished)},
	}
	scenario = append(append(scenario, wall...), Row{"LLM", cmp.Or(r.LLM, "–")})
	if r.DatasetFingerprint != "" {
		scenario = append(scenario, Row{"dataset fingerprint (its examples' ids, databases, questions and documents)", r.DatasetFingerprint})
	}
	if r.QuorumVersion != "" {
		by := "quorum " + r.QuorumVersion
		if r.Revision != "" {
			by += " (revision " + r.Revision + ")"
		}
		scenario = append(scenario, Row{"written by", by})
	}
	return scenario
}

// summaryRows are the run's outcome and its per-example figures (the wall
// time and the caller's rows follow them).
func summaryRows(r *Report) []Row {
	t := r.Totals
	summary := []Row{{"examples", fmt.Sprint(t.Examples)},
		{"answered / no answer / failed", fmt.Sprintf("%d / %d / %d", t.Answered, t.NoAnswer, t.Failed)}}
	if t.EX != nil {
		summary = append(summary, Row{"EX / " + t.EXAtKName(r.Votes), fmt.Sprintf("%.4f / %.4f (%s)", *t.EX, *t.EXAtK, t.EXAtKMeaning(r.Votes))})
	}
	return append(summary,
		Row{"high / low confidence", fmt.Sprintf("%d / %d", t.HighConf, t.LowConf)},
		Row{"LLM calls per example", fmt.Sprintf("%.2f", t.CallsPerEx)},
		Row{"warehouse queries per example", fmt.Sprintf("%.2f", t.QueriesPerEx)},
		Row{"tokens per LLM call", num(int(math.Round(t.TokensPerCall)))})
}

// aggregates are the per-example figures the page's charts are drawn from.
type aggregates struct {
	byDB, byDialect      map[string][2]int // right, scored
	lat, calls, finished []float64
	conf                 map[string]float64
	stages               cost.Ledger
	failed               []Example
}

func aggregate(r *Report) *aggregates {
	a := &aggregates{byDB: map[string][2]int{}, byDialect: map[string][2]int{}, conf: map[string]float64{}, stages: cost.Ledger{}}
	for _, e := range r.Examples {
		if e.Correct != nil {
			k, d := a.byDB[e.Database], a.byDialect[e.Dialect]
			k[1]++
			d[1]++
			if *e.Correct {
				k[0]++
				d[0]++
			}
			a.byDB[e.Database], a.byDialect[e.Dialect] = k, d
		}
		if e.Status != "failed" {
			a.lat = append(a.lat, e.LatencySeconds)
			a.calls = append(a.calls, float64(e.Cost.LLMCalls))
		}
		if e.Status != "answered" && e.Status != "no_answer" {
			a.failed = append(a.failed, e)
		}
		if e.FinishedSeconds > 0 {
			a.finished = append(a.finished, runningSeconds(r, e.FinishedSeconds))
		}
		a.conf[cmp.Or(e.Confidence, "none")+" → "+cmp.Or(e.Method, "none")]++
		a.stages.Merge(e.CostByStage)
	}
	return a
}

func (a *aggregates) confBars() []bar {
	var out []bar
	for k, v := range a.conf {
		out = append(out, bar{k, v})
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Label < out[j].Label })
	return out
}

// accuracyBars are the percent right per key (right, scored).
func accuracyBars(m map[string][2]int) []bar {
	var out []bar
	for k, v := range m {
		out = append(out, bar{Label: cmp.Or(k, "unknown"), Value: math.Round(float64(v[0])/float64(v[1])*1000) / 10})
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Label < out[j].Label })
	return out
}

// costRows are the run's cost totals, per example beside them, with the
// 429s, the limits learned and changed, and the fallbacks when any.
func costRows(r *Report) []costRow {
	c, n := r.Totals.Cost, max(r.Totals.Examples, 1) // per-example figures of an empty run stay finite
	per := func(v float64) string { return fmt.Sprintf("%.2f", v/float64(n)) }
	rows := []costRow{
		{"LLM calls", num(c.LLMCalls), per(float64(c.LLMCalls))},
		{"LLM calls that failed", num(c.LLMErrors), per(float64(c.LLMErrors))},
		{"prompt tokens", num(c.LLM.PromptTokens), num(c.LLM.PromptTokens / n)},
		{"completion tokens", num(c.LLM.CompletionTokens), num(c.LLM.CompletionTokens / n)},
		{"cached prompt tokens", fmt.Sprintf("%s (%s)", num(c.LLM.CachedTokens), pct(c.LLM.CachedTokens, c.LLM.PromptTokens)), num(c.LLM.CachedTokens / n)},
		{"money (at the endpoints' prices)", money(c.Money()), money(c.Money() / float64(n))},
		{"warehouse queries", num(c.Queries), per(float64(c.Queries))},
		{"warehouse queries that failed", num(c.QueryErrors), per(float64(c.QueryErrors))},
		{"warehouse time", secs(c.QueryTime.Seconds()), secs(c.QueryTime.Seconds() / float64(n))},
	}
	if c.LLM.RateLimited > 0 {
		rows = append(rows, costRow{"LLM requests answered 429 and retried (" + RateLimitNote(c) + ")",
			num(c.LLM.RateLimited), per(float64(c.LLM.RateLimited))})
	}
	for _, l := range r.Limits {
		rows = append(rows, costRow{"LLM limits learned (" + l.Note() + ")", num(l.Cuts) + " cuts", ""})
	}
	for _, ch := range r.LimitChanges {
		rows = append(rows, costRow{"LLM limit changed on the running cluster: " + ch.String(), ch.At.UTC().Format("15:04:05 UTC"), ""})
	}
	if c.LLM.Fallbacks > 0 {
		// A run never silently mixes models: name the examples a
		// fallback model answered calls of.
		var ids []string
		for _, e := range r.Examples {
			if e.Cost.LLM.Fallbacks > 0 {
				ids = append(ids, e.InstanceID)
			}
		}
		rows = append(rows, costRow{"LLM calls a fallback model answered (examples " + strings.Join(ids, ", ") + ")",
			num(c.LLM.Fallbacks), per(float64(c.LLM.Fallbacks))})
	}
	return rows
}

// stageRowsOf are the cost by stage, the costliest first (where a reader
// looks), and its chart's bars.
func stageRowsOf(stages cost.Ledger) ([]stageRow, []bar) {
	var rows []stageRow
	var bars []bar
	names := stages.Stages()
	sort.SliceStable(names, func(i, j int) bool { return stages[names[i]].Tokens() > stages[names[j]].Tokens() })
	total := stages.Total().Tokens()
	for _, name := range names {
		s := stages[name]
		rows = append(rows, stageRow{Stage: name, Calls: num(s.LLMCalls), Prompt: num(s.LLM.PromptTokens),
			Completion: num(s.LLM.CompletionTokens), Share: pct(s.Tokens(), total), Money: money(s.Money()), Queries: num(s.Queries), QueryTime: secs(s.QueryTime.Seconds())})
		bars = append(bars, bar{name, float64(s.Tokens())})
	}
	return rows, bars
}

// throughput is the examples finished by each finish time.
func throughput(finished []float64) (xs, ys []float64) {
	sort.Float64s(finished)
	for i, f := range finished {
		xs, ys = append(xs, f), append(ys, float64(i+1))
	}
	return xs, ys
}

// latencyNote sums the latencies up in a sentence, and says why the
// throughput chart is missing when points are too few.
func latencyNote(lat []float64, points int) string {
	note := "No example finished."
	if len(lat) > 0 {
		s := slices.Sorted(slices.Values(lat))
		note = fmt.Sprintf("Latency of the %d examples that did not fail: median %s, p95 %s, max %s.",
			len(s), secs(Quantile(s, 0.5)), secs(Quantile(s, 0.95)), secs(s[len(s)-1]))
	}
	if points < 2 {
		note += " No throughput chart: the run recorded fewer than two finish times."
	}
	return note
}

func rowOf(e Example, extra *Extra) exampleRow {
	row := exampleRow{ID: e.InstanceID, Status: e.Status, Latency: secs(e.LatencySeconds),
		Calls: num(e.Cost.LLMCalls), Tokens: num(e.Cost.Tokens())}
	if extra.Pages[e.InstanceID] {
		row.Page = ExamplesDir + "/" + PageFile(e.InstanceID)
	}
	return row
}

// exampleRows are the examples answered wrong and those that failed.
func exampleRows(r *Report, extra *Extra, failed []Example) (wrong, failedRows []exampleRow) {
	for _, e := range r.Examples {
		if e.Correct != nil && !*e.Correct && e.Status != "failed" {
			wrong = append(wrong, rowOf(e, extra))
		}
	}
	for _, e := range failed {
		failedRows = append(failedRows, rowOf(e, extra))
	}
	return wrong, failedRows
}

// addMembers adds an ensemble's members, their EX beside the ensemble's,
// and its rule.
func addMembers(data map[string]any, r *Report) {
	ms := memberRows(r)
	if len(ms) == 0 {
		return
	}
	data["Members"] = ms
	var labels []string
	var vals []float64
	for _, m := range ms {
		labels, vals = append(labels, m.Agent), append(vals, m.share)
	}
	if r.Totals.EX != nil {
		labels, vals = append(labels, "ensemble"), append(vals, 100**r.Totals.EX)
	}
	data["MemberChart"] = svgBars("EX of each member's own answer and of the ensemble's", "EX (percent)", "%", barsOf(labels, vals))
	for _, e := range r.Examples {
		if e.Rule != "" {
			data["Rule"] = e.Rule
			break
		}
	}
}
