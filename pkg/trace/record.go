package trace

import (
	"context"
	"errors"
	"strings"
	"sync"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	oteltrace "go.opentelemetry.io/otel/trace"

	"github.com/quorumsql/quorum/pkg/llm"
	"github.com/quorumsql/quorum/pkg/warehouse"
)

// Recorder collects one task's steps, and emits a span for each when the
// process exports traces. It is safe for concurrent use: a task may call
// the LLM from several goroutines.
type Recorder struct {
	level   Level
	tracer  oteltrace.Tracer
	content bool

	mu    sync.Mutex
	steps []Step
}

// RecorderConfig configures a Recorder.
type RecorderConfig struct {
	// Level is what the run's trace keeps.
	Level Level
	// Tracer emits the steps' spans; nil emits none.
	Tracer oteltrace.Tracer
	// Content puts prompts, replies and SQL in the spans (the user opts
	// in: they may hold data).
	Content bool
}

// NewRecorder returns a recorder, or nil when there is nothing to record
// or emit.
func NewRecorder(cfg RecorderConfig) *Recorder {
	if cfg.Level == None && cfg.Tracer == nil {
		return nil
	}
	return &Recorder{level: cfg.Level, tracer: cfg.Tracer, content: cfg.Content}
}

type recorderKey struct{}

// With returns ctx whose calls and queries r records.
func With(ctx context.Context, r *Recorder) context.Context {
	if r == nil {
		return ctx
	}
	return context.WithValue(ctx, recorderKey{}, r)
}

// From returns ctx's recorder, nil if none.
func From(ctx context.Context) *Recorder {
	r, _ := ctx.Value(recorderKey{}).(*Recorder)
	return r
}

// Steps returns the steps recorded, in the order they started.
func (r *Recorder) Steps() []Step {
	if r == nil || r.level == None {
		return nil
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	out := make([]Step, len(r.steps))
	copy(out, r.steps)
	// Steps are appended as they end; a trace reads them as they began.
	sortSteps(out)
	return out
}

func (r *Recorder) add(s Step) {
	if r.level == None {
		return
	}
	r.mu.Lock()
	r.steps = append(r.steps, s)
	r.mu.Unlock()
}

// Client records every call of an LLM client made under a context with a
// recorder.
type Client struct {
	LLM llm.Client
}

// Chat implements llm.Client.
func (c Client) Chat(ctx context.Context, req llm.Request) (*llm.Response, error) {
	r := From(ctx)
	if r == nil {
		return c.LLM.Chat(ctx, req)
	}
	start := time.Now()
	resp, err := c.LLM.Chat(ctx, req)
	r.call(ctx, start, time.Now(), req, resp, err)
	return resp, err
}

func (r *Recorder) call(ctx context.Context, start, end time.Time, req llm.Request, resp *llm.Response, err error) {
	c := &Call{Role: string(req.Role)}
	c.Params = Params{Temperature: req.Temperature, TopP: req.TopP, MaxTokens: req.MaxTokens, Seed: req.Seed,
		ToolChoice: req.ToolChoice, Stop: req.Stop, ContinueFinal: req.ContinueFinal}
	for _, t := range req.Tools {
		c.Params.Tools = append(c.Params.Tools, t.Name)
	}
	if resp != nil {
		c.Endpoint, c.Model, c.Usage = resp.Usage.Endpoint, resp.Usage.Model, resp.Usage
		if resp.Model != "" && resp.Model != c.Model {
			c.Answered = resp.Model
		}
		c.Finish, c.ToolCalls = resp.FinishReason, resp.ToolCalls
	}
	var ce *llm.CallError
	if errors.As(err, &ce) {
		c.Endpoint, c.Model, c.Usage = ce.Endpoint, ce.Model, ce.Usage
	}
	if err != nil {
		c.Error = err.Error()
	}
	if r.level == Full {
		c.Messages = make([]Message, len(req.Messages))
		for i, m := range req.Messages {
			c.Messages[i] = Message{Role: m.Role, Name: m.Name, Content: T(m.Content), ToolCalls: m.ToolCalls, ToolCallID: m.ToolCallID}
		}
		if resp != nil {
			c.Text, c.Reasoning = T(resp.Text), T(resp.Reasoning)
		}
	}
	r.add(Step{At: start, Seconds: end.Sub(start).Seconds(), LLM: c})
	r.chatSpan(ctx, start, end, req, resp, c)
}

// chatSpan emits the call's span by OpenTelemetry's GenAI conventions.
func (r *Recorder) chatSpan(ctx context.Context, start, end time.Time, req llm.Request, resp *llm.Response, c *Call) {
	if r.tracer == nil {
		return
	}
	attrs := []attribute.KeyValue{
		attribute.String("gen_ai.operation.name", "chat"),
		attribute.String("gen_ai.provider.name", "openai"), // the API quorum speaks to every endpoint
		attribute.String("gen_ai.request.model", c.Model),
		attribute.Int("gen_ai.usage.input_tokens", c.Usage.PromptTokens),
		attribute.Int("gen_ai.usage.output_tokens", c.Usage.CompletionTokens),
		attribute.String("quorum.llm.role", c.Role),
		attribute.String("quorum.llm.endpoint", c.Endpoint),
		attribute.Int("quorum.llm.attempts", c.Usage.Attempts),
		attribute.Int("quorum.llm.rate_limited", c.Usage.RateLimited),
		attribute.Int("quorum.llm.cached_tokens", c.Usage.CachedTokens),
		attribute.Int("quorum.llm.reasoning_tokens", c.Usage.ReasoningTokens),
		attribute.Float64("quorum.llm.limiter_wait_seconds", c.Usage.LimiterWait.Seconds()),
	}
	if c.Usage.WarmUpWait > 0 {
		// Waited for the first call of its prompt to warm the cache.
		attrs = append(attrs, attribute.Float64("quorum.llm.warm_up_wait_seconds", c.Usage.WarmUpWait.Seconds()))
	}
	if req.Temperature != nil {
		attrs = append(attrs, attribute.Float64("gen_ai.request.temperature", *req.Temperature))
	}
	if req.MaxTokens > 0 {
		attrs = append(attrs, attribute.Int("gen_ai.request.max_tokens", req.MaxTokens))
	}
	if req.Seed != nil {
		attrs = append(attrs, attribute.Int64("gen_ai.request.seed", *req.Seed))
	}
	if resp != nil {
		attrs = append(attrs, attribute.StringSlice("gen_ai.response.finish_reasons", []string{resp.FinishReason}))
		if resp.Model != "" {
			attrs = append(attrs, attribute.String("gen_ai.response.model", resp.Model))
		}
	}
	if r.content {
		attrs = append(attrs, attribute.String("gen_ai.input.messages", messagesJSON(req.Messages)))
		if resp != nil {
			attrs = append(attrs, attribute.String("gen_ai.output.messages", messagesJSON([]llm.Message{resp.Message()})))
		}
	}
	_, span := r.tracer.Start(ctx, "chat "+c.Model, oteltrace.WithTimestamp(start),
		oteltrace.WithSpanKind(oteltrace.SpanKindClient), oteltrace.WithAttributes(attrs...))
	if c.Error != "" {
		span.SetAttributes(attribute.String("error.type", errorType(c.Error)))
		span.SetStatus(codes.Error, c.Error)
	}
	span.End(oteltrace.WithTimestamp(end))
}

// PreviewRows and PreviewBytes bound a query's preview.
const (
	PreviewRows  = 5
	PreviewBytes = 2048
)

// Warehouse records every query of W made under a context with a
// recorder.
type Warehouse struct {
	W warehouse.Warehouse
}

// Dialect implements warehouse.Warehouse.
func (w *Warehouse) Dialect() warehouse.Dialect { return w.W.Dialect() }

// Close implements warehouse.Warehouse.
func (w *Warehouse) Close() error { return w.W.Close() }

// Query implements warehouse.Warehouse.
func (w *Warehouse) Query(ctx context.Context, sql string, lim warehouse.Limits) (*warehouse.Result, error) {
	r := From(ctx)
	if r == nil {
		return w.W.Query(ctx, sql, lim)
	}
	start := time.Now()
	res, err := w.W.Query(ctx, sql, lim)
	r.query(ctx, start, time.Now(), string(w.W.Dialect()), sql, res, err)
	return res, err
}

func (r *Recorder) query(ctx context.Context, start, end time.Time, dialect, sql string, res *warehouse.Result, err error) {
	q := &Query{Dialect: dialect, SQL: T(sql)}
	var qe *warehouse.QueryError
	switch {
	case errors.As(err, &qe):
		q.Status, q.Error = "error", qe.Message
	case err != nil:
		q.Status, q.Error = "failed", err.Error()
	case res.RowCount() == 0:
		q.Status = "empty"
	default:
		q.Status = "ok"
	}
	if res != nil {
		q.Rows, q.Truncated = res.RowCount(), res.Truncated
		for _, c := range res.Columns {
			q.Columns = append(q.Columns, c.Name)
		}
		if r.level == Full && res.RowCount() > 0 {
			q.Preview = T(preview(res))
		}
	}
	r.add(Step{At: start, Seconds: end.Sub(start).Seconds(), Query: q})
	if r.tracer == nil {
		return
	}
	attrs := []attribute.KeyValue{
		attribute.String("db.system.name", dbSystem(dialect)),
		attribute.Int("db.response.returned_rows", q.Rows),
		attribute.String("quorum.query.status", q.Status),
	}
	if r.content {
		attrs = append(attrs, attribute.String("db.query.text", sql))
	}
	_, span := r.tracer.Start(ctx, "query "+dialect, oteltrace.WithTimestamp(start),
		oteltrace.WithSpanKind(oteltrace.SpanKindClient), oteltrace.WithAttributes(attrs...))
	if q.Status == "failed" || q.Status == "error" {
		span.SetAttributes(attribute.String("error.type", q.Status))
		span.SetStatus(codes.Error, q.Error)
	}
	span.End(oteltrace.WithTimestamp(end))
}

// preview is the result's first rows as CSV, within PreviewBytes.
func preview(res *warehouse.Result) string {
	head := &warehouse.Result{Columns: res.Columns, Rows: res.Rows[:min(len(res.Rows), PreviewRows)]}
	s := head.CSV()
	if len(s) > PreviewBytes {
		s = s[:PreviewBytes] + "…"
	}
	return s
}

// dbSystem is OpenTelemetry's db.system.name of a dialect.
func dbSystem(dialect string) string {
	switch dialect {
	case "bigquery":
		return "gcp.bigquery"
	}
	return dialect
}

// errorType is a short class of an error text for error.type.
func errorType(msg string) string {
	switch {
	case strings.Contains(msg, "context window"):
		return "context_too_long"
	case strings.Contains(msg, "timed out") || strings.Contains(msg, "deadline"):
		return "timeout"
	case strings.Contains(msg, "canceled") || strings.Contains(msg, "cancelled"):
		return "cancelled"
	}
	return "call_failed"
}
