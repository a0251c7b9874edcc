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
	return outputs.WriteHTML(w, run, x)
}
