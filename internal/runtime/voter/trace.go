package voter

import (
	"context"
	"fmt"
	"time"

	"go.opentelemetry.io/otel/attribute"
	oteltrace "go.opentelemetry.io/otel/trace"

	"github.com/quorumsql/quorum/internal/runtime/message"
	"github.com/quorumsql/quorum/internal/runtime/runenv"
	"github.com/quorumsql/quorum/internal/runtime/runstate"
	"github.com/quorumsql/quorum/pkg/runtime/agent"
	"github.com/quorumsql/quorum/pkg/trace"
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
	td := trace.DecisionOf(r.Round, d, cands)
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
