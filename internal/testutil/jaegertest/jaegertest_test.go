package jaegertest_test

import (
	"context"
	"errors"
	"slices"
	"testing"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracehttp"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	semconv "go.opentelemetry.io/otel/semconv/v1.41.0"
	"go.opentelemetry.io/otel/trace"

	"github.com/quorumsql/quorum/internal/testutil/jaegertest"
)

// provider returns a tracer provider of service that exports to j over
// OTLP/HTTP with the official exporter, configured as a role is: by
// OTEL_EXPORTER_OTLP_ENDPOINT.
func provider(t *testing.T, j *jaegertest.Jaeger, service string) *sdktrace.TracerProvider {
	t.Helper()
	exp, err := otlptracehttp.New(context.Background())
	if err != nil {
		t.Fatalf("otlptracehttp: %v", err)
	}
	res := resource.NewWithAttributes(semconv.SchemaURL, semconv.ServiceName(service), attribute.String("quorum.role", service))
	return sdktrace.NewTracerProvider(sdktrace.WithSyncer(exp), sdktrace.WithResource(res))
}

// TestSpansReadBack: spans two services send through the OpenTelemetry
// SDK come back from Jaeger's query API as one trace, with their
// operation names, services, attributes and parent links.
func TestSpansReadBack(t *testing.T) {
	j := jaegertest.Start(t)
	t.Setenv("OTEL_EXPORTER_OTLP_ENDPOINT", j.OTLPEndpoint())
	ctx := context.Background()

	coord := provider(t, j, "test-coordinator")
	worker := provider(t, j, "test-worker")
	_, rootSpan := coord.Tracer("jaegertest").Start(ctx, "example ex1", trace.WithAttributes(attribute.String("quorum.example", "ex1")))
	// The worker's span continues the coordinator's trace, as one whose
	// context came in a NATS message's headers.
	_, child := worker.Tracer("jaegertest").Start(trace.ContextWithRemoteSpanContext(ctx, rootSpan.SpanContext()), "chat gpt-4o",
		trace.WithAttributes(attribute.String("gen_ai.request.model", "gpt-4o"), attribute.Int64("gen_ai.usage.input_tokens", 1234567890123)))
	child.End()
	rootSpan.End()
	for _, p := range []*sdktrace.TracerProvider{coord, worker} {
		if err := p.Shutdown(ctx); err != nil {
			t.Fatalf("shutdown: %v", err)
		}
	}

	id := rootSpan.SpanContext().TraceID().String()
	tr := j.WaitTrace(t, 30*time.Second, id, func(tr jaegertest.Trace) bool { return len(tr.Spans) == 2 })
	if got, want := tr.Services(), []string{"test-coordinator", "test-worker"}; !slices.Equal(got, want) {
		t.Errorf("trace services %v, want %v", got, want)
	}
	rs, ok := tr.Span(rootSpan.SpanContext().SpanID().String())
	if !ok || rs.OperationName != "example ex1" || rs.Parent() != "" || rs.Process.ServiceName != "test-coordinator" {
		t.Errorf("root span %+v (found %v), want operation %q of test-coordinator with no parent", rs, ok, "example ex1")
	}
	if v, _ := rs.Tag("quorum.example"); v != "ex1" {
		t.Errorf("root span quorum.example = %q, want ex1", v)
	}
	cs, ok := tr.Span(child.SpanContext().SpanID().String())
	if !ok || cs.OperationName != "chat gpt-4o" || cs.Process.ServiceName != "test-worker" {
		t.Fatalf("child span %+v (found %v), want chat gpt-4o of test-worker", cs, ok)
	}
	if cs.Parent() != rs.SpanID {
		t.Errorf("child's parent %q, want the root %q", cs.Parent(), rs.SpanID)
	}
	// An int64 past float64's exact range comes back exact.
	if v, _ := cs.Tag("gen_ai.usage.input_tokens"); v != "1234567890123" {
		t.Errorf("gen_ai.usage.input_tokens = %q, want 1234567890123", v)
	}
	if v, _ := cs.Process.Tag("quorum.role"); v != "test-worker" {
		t.Errorf("worker's resource attribute quorum.role = %q, want test-worker", v)
	}
	if got := tr.Named("chat gpt-4o"); len(got) != 1 {
		t.Errorf("Named(chat gpt-4o) found %d spans, want 1", len(got))
	}

	svcs, err := j.Services(ctx)
	if err != nil || !slices.Contains(svcs, "test-coordinator") || !slices.Contains(svcs, "test-worker") {
		t.Errorf("Services() = %v, %v; want both test services", svcs, err)
	}
	traces, err := j.Traces(ctx, "test-worker", 0)
	if err != nil || len(traces) != 1 || traces[0].TraceID != id {
		t.Errorf("Traces(test-worker) = %d traces, %v; want the one trace %s", len(traces), err, id)
	}
	for _, tc := range []struct {
		q    jaegertest.Query
		want int
	}{
		{jaegertest.Query{Service: "test-coordinator", Tags: map[string]string{"quorum.example": "ex1"}}, 1},
		{jaegertest.Query{Service: "test-coordinator", Tags: map[string]string{"quorum.example": "ex2"}}, 0},
		{jaegertest.Query{Service: "test-worker", Operation: "chat gpt-4o"}, 1},
		{jaegertest.Query{Service: "test-worker", Operation: "example ex1"}, 0},
	} {
		got, err := j.Find(ctx, tc.q)
		if err != nil || len(got) != tc.want || (tc.want == 1 && (got[0].TraceID != id || len(got[0].Spans) != 2)) {
			t.Errorf("Find(%+v) = %d traces, %v; want %d (the trace %s, whole)", tc.q, len(got), err, tc.want, id)
		}
	}
	if _, err := j.Trace(ctx, "0123456789abcdef0123456789abcdef"); !errors.Is(err, jaegertest.ErrNotFound) {
		t.Errorf("Trace of an unknown ID: %v, want ErrNotFound", err)
	}
}
