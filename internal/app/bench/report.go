package bench

import (
	"bytes"
	"fmt"
	"html/template"
	"io"

	"github.com/quorumsql/quorum/pkg/outputs"
)

var scalingTable = template.Must(template.New("scaling").Parse(`<p>Throughput of short runs with no provider limit, by the number of generator workers.</p>
<table><tr><th>generator workers</th><th>LLM calls/min</th><th>examples/min</th><th>wall s</th></tr>
{{range .}}<tr><td>{{.Generators}}</td><td>{{printf "%.0f" .CallsPerMinute}}</td><td>{{printf "%.1f" .ExamplesPerMinute}}</td><td>{{printf "%.1f" .Wall}}</td></tr>{{end}}</table>`))

var seriesTable = template.Must(template.New("series").Funcs(template.FuncMap{"mib": func(b int64) float64 { return float64(b) / (1 << 20) }}).Parse(`<p>The scenario at each size, each on a rig of its own. Outside the wall: the point's whole time less the run's wall (preparation and output). Overhead: a task's time in its worker outside the agent's execute.</p>
<table><tr><th>examples</th><th>wall s</th><th>quota ratio</th><th>429s</th><th>failed</th><th>CPU s / example</th><th>peak RSS MiB</th><th>outside the wall s</th><th>outside the wall ms / example</th><th>overhead ms p50</th><th>overhead ms p95</th><th>Redis bytes / example</th></tr>
{{range .}}<tr><td>{{.Examples}}</td><td>{{printf "%.1f" .Wall}}</td><td>{{printf "%.3f" .QuotaRatio}}</td><td>{{.RateLimited}}</td><td>{{.FailedExamples}}</td><td>{{printf "%.3f" .CPUPerExample}}</td><td>{{printf "%.0f" (mib .PeakRSS)}}</td><td>{{printf "%.1f" .OutsideWall}}</td><td>{{printf "%.2f" .OutsideWallPerExampleMS}}</td><td>{{printf "%.2f" .RuntimeOverheadP50MS}}</td><td>{{printf "%.2f" .RuntimeOverheadP95MS}}</td><td>{{printf "%.0f" .RedisBytesPerExample}}</td></tr>{{end}}</table>`))

// WriteHTML renders the run's report (outputs.WriteHTML), with the
// benchmark's figures and scaling table when bench is not nil.
func WriteHTML(w io.Writer, run *outputs.Report, bench *Report) error {
	if bench == nil {
		return outputs.WriteHTML(w, run, nil)
	}
	x := &outputs.Extra{Title: "benchmark " + bench.Scenario.Name}
	add := func(l, v string) { x.Rows = append(x.Rows, outputs.Row{Label: l, Value: v}) }
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
	if len(bench.Scaling) > 0 {
		var b bytes.Buffer
		if err := scalingTable.Execute(&b, bench.Scaling); err != nil {
			return fmt.Errorf("report.html scaling table: %w", err)
		}
		x.Sections = append(x.Sections, outputs.Section{ID: "scaling", Heading: "Scaling (no provider limit)", HTML: template.HTML(b.String())})
	}
	if len(bench.Series) > 0 {
		var b bytes.Buffer
		if err := seriesTable.Execute(&b, bench.Series); err != nil {
			return fmt.Errorf("report.html scale series: %w", err)
		}
		x.Sections = append(x.Sections, outputs.Section{ID: "series", Heading: "Scale series", HTML: template.HTML(b.String())})
	}
	return outputs.WriteHTML(w, run, x)
}
