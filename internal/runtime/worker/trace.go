package worker

import (
	"context"
	"errors"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	oteltrace "go.opentelemetry.io/otel/trace"

	"github.com/quorumsql/quorum/internal/queue"
	"github.com/quorumsql/quorum/internal/runtime/message"
	"github.com/quorumsql/quorum/internal/runtime/runenv"
	"github.com/quorumsql/quorum/pkg/runtime/agent"
	"github.com/quorumsql/quorum/pkg/trace"
)

// taskTrace is one delivery's record: its recorder, which the agent's
// calls and queries write into, and its span.
type taskTrace struct {
	w        *worker
	run      *runenv.Run
	t        *message.Task
	delivery int
	start    time.Time
	rec      *trace.Recorder
	span     oteltrace.Span
	// outcome, when set, overrides the one read from the error.
	outcome string
	ended   bool
}

// startTrace starts a task's record; its span continues the trace the
// task's message carries, else the example's.
func (w *worker) startTrace(ctx context.Context, d queue.Delivery, run *runenv.Run, t *message.Task, kind string) *taskTrace {
	tr := &taskTrace{w: w, run: run, t: t, delivery: d.Attempt, start: time.Now(), rec: w.env.Recorder(run)}
	if tracer := w.env.Exporter.Tracer(); tracer != nil {
		parent := queue.TraceContext(ctx, d.Msg)
		if !oteltrace.SpanContextFromContext(parent).IsValid() {
			parent = trace.ExampleContext(ctx, t.Run, t.Example, run.Manifest.TraceParent)
		}
		_, tr.span = tracer.Start(parent, "task "+kind, oteltrace.WithSpanKind(oteltrace.SpanKindConsumer),
			oteltrace.WithAttributes(attribute.String("quorum.run", t.Run), attribute.String("quorum.example", t.Example),
				attribute.String("quorum.agent", t.Agent), attribute.String("quorum.task.kind", kind),
				attribute.String("quorum.task.id", t.Task.ID), attribute.Int("quorum.task.round", t.Task.Round),
				attribute.String("quorum.pool", string(w.pool)), attribute.String("quorum.worker", w.env.Name),
				attribute.Int("quorum.task.delivery", d.Attempt)))
	}
	return tr
}

// context is ctx with the task's recorder and span.
func (tr *taskTrace) context(ctx context.Context) context.Context {
	if tr.span != nil {
		ctx = oteltrace.ContextWithSpan(ctx, tr.span)
	}
	return trace.With(ctx, tr.rec)
}

// end records the delivery's outcome in the example's trace and ends its
// span, once.
func (tr *taskTrace) end(ctx context.Context, out *agent.Outcome, err error) {
	if tr.ended {
		return
	}
	tr.ended = true
	outcome := tr.outcome
	switch {
	case outcome != "":
	case err == nil:
		outcome = "done"
	case errors.Is(err, errLeaseLost):
		outcome = "lease_lost"
	case agent.IsPermanent(err) || queue.IsPermanent(err):
		outcome = "failed"
	default:
		outcome = "retry"
	}
	if tr.span != nil {
		tr.span.SetAttributes(attribute.String("quorum.task.outcome", outcome))
		if err != nil {
			tr.span.SetStatus(codes.Error, err.Error())
		}
		tr.span.End()
	}
	if tr.rec == nil || tr.run.TraceLevel() == trace.None {
		return
	}
	t := tr.t
	rt := &trace.Task{Kind: t.Task.Kind, ID: t.Task.ID, Pool: string(tr.w.pool), Round: t.Task.Round, Slots: t.Task.Slots,
		Delivery: tr.delivery, Outcome: outcome, Steps: tr.rec.Steps()}
	if err != nil {
		rt.Error = err.Error()
	}
	if out != nil && outcome == "done" {
		for _, r := range out.Results {
			rt.Results = append(rt.Results, trace.Result{Index: r.Index, Status: r.Status, Rows: r.Rows, SQL: r.SQL, Error: r.Error})
		}
		for _, n := range out.Next {
			rt.Next = append(rt.Next, n.ID)
		}
		rt.Part = out.Part != nil
	}
	e := &trace.Entry{Type: trace.TypeTask, Agent: t.Agent, Process: tr.w.env.Name, At: tr.start, End: time.Now(), Task: rt}
	if tr.span != nil {
		e.TraceID = tr.span.SpanContext().TraceID().String()
	}
	tr.w.env.WriteTrace(context.WithoutCancel(ctx), tr.run, t.Example, e)
}
