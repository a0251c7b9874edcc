package voter

import (
	"context"
	"fmt"
	"sort"
	"time"

	"go.opentelemetry.io/otel/attribute"
	oteltrace "go.opentelemetry.io/otel/trace"

	"github.com/quorumsql/quorum/internal/runtime/message"
	"github.com/quorumsql/quorum/internal/runtime/runenv"
	"github.com/quorumsql/quorum/internal/runtime/runstate"
	"github.com/quorumsql/quorum/internal/trace"
	"github.com/quorumsql/quorum/pkg/runtime/agent"
)

// traceDecision records a decision in the example's trace and emits its
// span, a child of the example's root; it returns ctx with that span.
func (v *Voter) traceDecision(ctx context.Context, run *runenv.Run, r runstate.Round, d *agent.Decision, cands []*agent.Candidate) context.Context {
	now := time.Now()
	if tracer := v.env.Exporter.Tracer(); tracer != nil {
		parent := trace.ExampleContext(ctx, r.Run, r.Example, run.Manifest.TraceParent)
		_, span := tracer.Start(parent, fmt.Sprintf("decide round %d", r.Round), oteltrace.WithAttributes(
			attribute.String("quorum.run", r.Run), attribute.String("quorum.example", r.Example),
			attribute.String("quorum.agent", r.Agent), attribute.Int("quorum.round", r.Round),
			attribute.Int("quorum.candidates", len(cands)), attribute.Int("quorum.valid", d.Valid),
			attribute.String("quorum.confidence", d.Confidence), attribute.String("quorum.method", d.Method),
			attribute.Bool("quorum.next_round", d.Next != nil)))
		span.End()
		ctx = oteltrace.ContextWithSpan(ctx, span)
	}
	if run.TraceLevel() == trace.None {
		return ctx
	}
	td := &trace.Decision{Round: r.Round, Confidence: d.Confidence, Method: d.Method, Valid: d.Valid, Agreed: d.Agreed, Rule: d.Rule}
	td.Candidates, td.Clusters = clusters(cands)
	if d.Winner != nil {
		td.Winner = candName(d.Winner)
	}
	if d.Sampling != nil {
		td.StoppedAfter, td.Posterior = d.Sampling.StoppedAfter, d.Sampling.Posterior
	}
	if d.Next != nil {
		n := d.Next.Round
		td.NextRound = &n
		for _, t := range d.Next.Tasks {
			td.NextTasks = append(td.NextTasks, t.ID)
		}
	}
	for _, m := range d.Members {
		tm := trace.Member{Agent: m.Agent, Confidence: m.Confidence, Method: m.Method, Valid: m.Valid, Agrees: m.Agrees}
		if m.Winner != nil {
			tm.Winner = candName(m.Winner)
		}
		td.Members = append(td.Members, tm)
	}
	e := &trace.Entry{Type: trace.TypeDecision, Agent: r.Agent, Process: v.env.Name, At: now, End: time.Now(), Decision: td}
	if sc := oteltrace.SpanContextFromContext(ctx); sc.IsValid() {
		e.TraceID = sc.TraceID().String()
	}
	v.env.WriteTrace(ctx, run, r.Example, e)
	return ctx
}

// traceFinal records the example's final answer in its trace.
func (v *Voter) traceFinal(ctx context.Context, run *runenv.Run, f *message.FinalAnswer) {
	now := time.Now()
	v.env.WriteTrace(ctx, run, f.Example, &trace.Entry{Type: trace.TypeFinal, Agent: f.Agent, Process: v.env.Name, At: now, End: now,
		Final: &trace.Final{Status: f.Status, Confidence: f.Confidence, Method: f.Method, SQL: f.SQL, Rounds: f.Rounds,
			Candidates: f.Candidates, Valid: f.Valid, Error: f.Error}})
}

func candName(c *agent.Candidate) string { return fmt.Sprintf("%d.%d", c.Round, c.Index) }

// clusters groups the usable candidates by equal result tables, largest
// group first; the unusable ones are cluster -1.
func clusters(cands []*agent.Candidate) ([]trace.Candidate, [][]string) {
	out := make([]trace.Candidate, len(cands))
	byCSV := map[string]int{}
	var groups [][]string
	for i, c := range cands {
		out[i] = trace.Candidate{Round: c.Round, Index: c.Index, Status: c.Status, Rows: c.Rows, SQL: c.SQL, Cluster: -1}
		if c.Status != agent.StatusOK {
			continue
		}
		g, ok := byCSV[c.CSV]
		if !ok {
			g = len(groups)
			byCSV[c.CSV] = g
			groups = append(groups, nil)
		}
		groups[g] = append(groups[g], candName(c))
		out[i].Cluster = g
	}
	order := make([]int, len(groups))
	for i := range order {
		order[i] = i
	}
	sort.SliceStable(order, func(a, b int) bool { return len(groups[order[a]]) > len(groups[order[b]]) })
	rank := make([]int, len(groups))
	sorted := make([][]string, len(groups))
	for r, g := range order {
		rank[g], sorted[r] = r, groups[g]
	}
	for i := range out {
		if out[i].Cluster >= 0 {
			out[i].Cluster = rank[out[i].Cluster]
		}
	}
	return out, sorted
}
