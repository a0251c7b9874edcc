package bench

import (
	"fmt"
	"html/template"
	"io"
	"math"
	"sort"
	"strings"

	"github.com/quorumsql/quorum/pkg/outputs"
)

// bar is one bar of a chart.
type bar struct {
	Label string
	Value float64
}

// svgBars draws a horizontal bar chart.
func svgBars(title, unit string, bars []bar) template.HTML {
	if len(bars) == 0 {
		return ""
	}
	maxV := 0.0
	for _, b := range bars {
		maxV = math.Max(maxV, b.Value)
	}
	if maxV == 0 {
		maxV = 1
	}
	const w, rowH, labelW = 640, 22, 180
	h := rowH*len(bars) + 30
	var s strings.Builder
	fmt.Fprintf(&s, `<svg xmlns="http://www.w3.org/2000/svg" width="%d" height="%d" role="img" aria-label="%s">`, w, h, template.HTMLEscapeString(title))
	fmt.Fprintf(&s, `<text x="0" y="14" font-weight="bold">%s</text>`, template.HTMLEscapeString(title))
	for i, b := range bars {
		y := 24 + i*rowH
		bw := (w - labelW - 70) * b.Value / maxV
		fmt.Fprintf(&s, `<text x="0" y="%d" font-size="12">%s</text>`, y+14, template.HTMLEscapeString(b.Label))
		fmt.Fprintf(&s, `<rect x="%d" y="%d" width="%.1f" height="%d" fill="#4c78a8"/>`, labelW, y+2, bw, rowH-6)
		fmt.Fprintf(&s, `<text x="%.1f" y="%d" font-size="12">%s%s</text>`, float64(labelW)+bw+4, y+14, trim(b.Value), unit)
	}
	s.WriteString(`</svg>`)
	return template.HTML(s.String())
}

// svgLine draws a line of points (x ascending).
func svgLine(title, xLabel, yLabel string, xs, ys []float64) template.HTML {
	if len(xs) < 2 {
		return ""
	}
	const w, h, pad = 640, 240, 40
	maxX, maxY := xs[len(xs)-1], 0.0
	for _, y := range ys {
		maxY = math.Max(maxY, y)
	}
	if maxX == 0 {
		maxX = 1
	}
	if maxY == 0 {
		maxY = 1
	}
	var pts []string
	for i := range xs {
		pts = append(pts, fmt.Sprintf("%.1f,%.1f", pad+(w-2*pad)*xs[i]/maxX, h-pad-(h-2*pad)*ys[i]/maxY))
	}
	return template.HTML(fmt.Sprintf(`<svg xmlns="http://www.w3.org/2000/svg" width="%d" height="%d" role="img" aria-label="%s">`+
		`<text x="0" y="14" font-weight="bold">%s</text>`+
		`<line x1="%d" y1="%d" x2="%d" y2="%d" stroke="#888"/><line x1="%d" y1="%d" x2="%d" y2="%d" stroke="#888"/>`+
		`<polyline fill="none" stroke="#f58518" stroke-width="2" points="%s"/>`+
		`<text x="%d" y="%d" font-size="12">%s (max %s)</text><text x="0" y="%d" font-size="12">%s (max %s)</text></svg>`,
		w, h, template.HTMLEscapeString(title), template.HTMLEscapeString(title),
		pad, h-pad, w-pad, h-pad, pad, pad, pad, h-pad, strings.Join(pts, " "),
		w/2-40, h-8, template.HTMLEscapeString(xLabel), trim(maxX), 30, template.HTMLEscapeString(yLabel), trim(maxY)))
}

func trim(v float64) string {
	if v == math.Trunc(v) && math.Abs(v) < 1e9 {
		return fmt.Sprintf("%.0f", v)
	}
	return fmt.Sprintf("%.2f", v)
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

var page = template.Must(template.New("report").Parse(`<!doctype html>
<html><head><meta charset="utf-8"><title>quorum report: {{.Title}}</title>
<style>body{font-family:sans-serif;max-width:980px;margin:2em auto;color:#222}table{border-collapse:collapse}td,th{border:1px solid #ccc;padding:4px 8px;text-align:right}th{background:#f3f3f3}td:first-child,th:first-child{text-align:left}.note{color:#a33}</style>
</head><body>
<h1>quorum report: {{.Title}}</h1>
<p class="note">{{.LLM}}</p>
<table>{{range .Summary}}<tr><th>{{.Label}}</th><td>{{.Value}}</td></tr>{{end}}</table>
{{range .Charts}}<p>{{.}}</p>{{end}}
{{if .Scaling}}<h2>Scaling (no provider limit)</h2><table><tr><th>generator workers</th><th>LLM calls/min</th><th>examples/min</th><th>wall s</th></tr>
{{range .Scaling}}<tr><td>{{.Generators}}</td><td>{{printf "%.0f" .CallsPerMinute}}</td><td>{{printf "%.1f" .ExamplesPerMinute}}</td><td>{{printf "%.1f" .Wall}}</td></tr>{{end}}</table>{{end}}
</body></html>
`))

type row struct{ Label, Value string }

// WriteHTML renders a report of a run, with the benchmark's figures when
// bench is not nil.
func WriteHTML(w io.Writer, run *outputs.Report, bench *Report) error {
	data := struct {
		Title, LLM string
		Summary    []row
		Charts     []template.HTML
		Scaling    []ScalingPoint
	}{Title: run.RunID, LLM: run.LLM}
	t := run.Totals
	add := func(l, v string) { data.Summary = append(data.Summary, row{l, v}) }
	add("examples", fmt.Sprint(t.Examples))
	add("answered / no answer / failed", fmt.Sprintf("%d / %d / %d", t.Answered, t.NoAnswer, t.Failed))
	if t.EX != nil {
		add("EX / EX@k", fmt.Sprintf("%.4f / %.4f", *t.EX, *t.EXAtK))
	}
	add("high / low confidence", fmt.Sprintf("%d / %d", t.HighConf, t.LowConf))
	add("LLM calls per example", fmt.Sprintf("%.2f", t.CallsPerEx))
	add("warehouse queries per example", fmt.Sprintf("%.2f", t.QueriesPerEx))
	add("tokens per LLM call", fmt.Sprintf("%.0f", t.TokensPerCall))
	add("wall time", fmt.Sprintf("%.1f s", t.WallSeconds))
	if bench != nil {
		add("quota bound / wall (quota ratio)", fmt.Sprintf("%.1f s / %.1f s = %.3f (%s)", bench.QuotaBound, bench.Wall, bench.QuotaRatio, bench.BindingLimit))
		add("429s / redeliveries / failed examples", fmt.Sprintf("%d / %d / %d", bench.RateLimited, bench.Redeliveries, bench.FailedExamples))
		add("example latency p50 / p95", fmt.Sprintf("%.1f s / %.1f s", bench.LatencyP50, bench.LatencyP95))
		add("example latency once its first task started p50 / p95", fmt.Sprintf("%.1f s / %.1f s", bench.ServiceP50, bench.ServiceP95))
		add("one candidate chain p50 / p95", fmt.Sprintf("%.1f s / %.1f s", bench.ChainP50, bench.ChainP95))
		add("orchestration overhead per task", fmt.Sprintf("%.1f ms", bench.OverheadMS))
		switch {
		case bench.BindsAt > 0:
			add("request quota binds from", fmt.Sprintf("%d generator workers", bench.BindsAt))
		case bench.BindsAtEstimate > 0:
			add("request quota binds from (extrapolated)", fmt.Sprintf("about %d generator workers", bench.BindsAtEstimate))
		}
		add("LLM calls / DB calls per candidate (paper: 3.52 / 3.89 with exploration, 1.69 without)", fmt.Sprintf("%.2f / %.2f", bench.CallsPerCand, bench.QueriesPerCand))
		data.Scaling = bench.Scaling
	}
	byDB := map[string][2]int{}
	byDialect := map[string][2]int{}
	var lat, calls, finished []float64
	conf := map[string]float64{}
	for _, e := range run.Examples {
		if e.Correct != nil {
			k := byDB[e.Database]
			d := byDialect[e.Dialect]
			k[1]++
			d[1]++
			if *e.Correct {
				k[0]++
				d[0]++
			}
			byDB[e.Database], byDialect[e.Dialect] = k, d
		}
		if e.Status != "failed" {
			lat = append(lat, e.LatencySeconds)
			calls = append(calls, float64(e.Cost.LLMCalls))
		}
		if e.FinishedSeconds > 0 {
			finished = append(finished, e.FinishedSeconds)
		}
		conf[e.Confidence+" → "+e.Method]++
	}
	acc := func(m map[string][2]int) []bar {
		var out []bar
		for k, v := range m {
			out = append(out, bar{Label: k, Value: float64(v[0]) / float64(v[1]) * 100})
		}
		sort.Slice(out, func(i, j int) bool { return out[i].Label < out[j].Label })
		return out
	}
	var confBars []bar
	for k, v := range conf {
		confBars = append(confBars, bar{k, v})
	}
	sort.Slice(confBars, func(i, j int) bool { return confBars[i].Label < confBars[j].Label })
	data.Charts = append(data.Charts, svgBars("Accuracy by dialect", "%", acc(byDialect)), svgBars("Accuracy by database", "%", acc(byDB)),
		svgBars("Confidence and final method", "", confBars), svgBars("LLM calls per example", "", histogram(calls, 8, "")),
		svgBars("Example latency", "", histogram(lat, 8, " s")))
	sort.Float64s(finished)
	var xs, ys []float64
	for i, f := range finished {
		xs, ys = append(xs, f), append(ys, float64(i+1))
	}
	data.Charts = append(data.Charts, svgLine("Throughput over time", "seconds", "examples finished", xs, ys))
	return page.Execute(w, data)
}
