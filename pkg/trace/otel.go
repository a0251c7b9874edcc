package trace

import (
	"context"
	"crypto/rand"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/fnv"
	"net/url"
	"os"
	"strconv"
	"strings"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracegrpc"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracehttp"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	oteltrace "go.opentelemetry.io/otel/trace"
)

// ExportConfig configures a process's OpenTelemetry export.
type ExportConfig struct {
	// Endpoint is the OTLP collector's URL (--otlp-endpoint); empty
	// takes OTEL_EXPORTER_OTLP_TRACES_ENDPOINT or
	// OTEL_EXPORTER_OTLP_ENDPOINT, and no export when neither is set.
	Endpoint string
	// Protocol is http/protobuf (the default) or grpc; empty takes
	// OTEL_EXPORTER_OTLP_PROTOCOL.
	Protocol string
	// Service is the role (service.name), Instance the process's name.
	Service, Instance string
	// Content puts prompts, replies and SQL in spans; also turned on by
	// OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT=true.
	Content bool
}

// Exporter is a process's span export.
type Exporter struct {
	tp      *sdktrace.TracerProvider
	tracer  oteltrace.Tracer
	content bool
}

// NewExporter starts exporting spans; it returns nil (no export) when no
// endpoint is configured.
func NewExporter(ctx context.Context, cfg ExportConfig) (*Exporter, error) {
	endpoint := cfg.Endpoint
	if endpoint == "" {
		endpoint = os.Getenv("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT")
	}
	if endpoint == "" {
		endpoint = os.Getenv("OTEL_EXPORTER_OTLP_ENDPOINT")
	}
	if endpoint == "" {
		return nil, nil
	}
	u, err := url.Parse(endpoint)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return nil, fmt.Errorf("--otlp-endpoint %q: want an http:// or https:// URL of an OTLP collector (e.g. http://localhost:4318)", endpoint)
	}
	protocol := cfg.Protocol
	if protocol == "" {
		protocol = os.Getenv("OTEL_EXPORTER_OTLP_PROTOCOL")
	}
	var exp sdktrace.SpanExporter
	switch protocol {
	case "", "http/protobuf":
		opts := []otlptracehttp.Option{otlptracehttp.WithEndpoint(u.Host)}
		if u.Scheme == "http" {
			opts = append(opts, otlptracehttp.WithInsecure())
		}
		if p := strings.TrimSuffix(u.Path, "/"); p != "" {
			opts = append(opts, otlptracehttp.WithURLPath(p))
		}
		exp, err = otlptracehttp.New(ctx, opts...)
	case "grpc":
		opts := []otlptracegrpc.Option{otlptracegrpc.WithEndpoint(u.Host)}
		if u.Scheme == "http" {
			opts = append(opts, otlptracegrpc.WithInsecure())
		}
		exp, err = otlptracegrpc.New(ctx, opts...)
	default:
		return nil, fmt.Errorf("OTLP protocol %q: want http/protobuf or grpc", protocol)
	}
	if err != nil {
		return nil, fmt.Errorf("OTLP exporter to %s: %w", endpoint, err)
	}
	res := resource.NewSchemaless(attribute.String("service.name", cfg.Service),
		attribute.String("service.instance.id", cfg.Instance), attribute.String("service.namespace", "quorum"))
	tp := sdktrace.NewTracerProvider(sdktrace.WithBatcher(exp, sdktrace.WithBatchTimeout(time.Second)),
		sdktrace.WithResource(res), sdktrace.WithIDGenerator(ids{}))
	content := cfg.Content
	if v, err := strconv.ParseBool(os.Getenv("OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT")); err == nil && v {
		content = true
	}
	return &Exporter{tp: tp, tracer: tp.Tracer("github.com/quorumsql/quorum"), content: content}, nil
}

// Tracer is the exporter's tracer; nil for a nil exporter.
func (e *Exporter) Tracer() oteltrace.Tracer {
	if e == nil {
		return nil
	}
	return e.tracer
}

// Content says whether spans carry prompts, replies and SQL.
func (e *Exporter) Content() bool { return e != nil && e.content }

// Shutdown sends the spans not yet exported and stops.
func (e *Exporter) Shutdown(ctx context.Context) error {
	if e == nil {
		return nil
	}
	return e.tp.Shutdown(ctx)
}

// Flush sends the spans not yet exported.
func (e *Exporter) Flush(ctx context.Context) error {
	if e == nil {
		return nil
	}
	return e.tp.ForceFlush(ctx)
}

// An example's trace and its root span have ids derived from the run and
// the example, so every role of the cluster names the same trace and
// parent without asking anyone: the coordinator, which emits the root span
// when the example ends, and the voter, whose decisions are its children.

// ExampleIDs are the example's trace id and root span id.
func ExampleIDs(run, ex string) (oteltrace.TraceID, oteltrace.SpanID) {
	var tid oteltrace.TraceID
	var sid oteltrace.SpanID
	h := fnv.New128a()
	fmt.Fprintf(h, "%s\x00%s", run, ex)
	copy(tid[:], h.Sum(nil))
	h64 := fnv.New64a()
	fmt.Fprintf(h64, "%s\x00%s\x00root", run, ex)
	binary.BigEndian.PutUint64(sid[:], h64.Sum64()|1) // never the invalid zero id
	return tid, sid
}

// ExampleContext is ctx with the example's root span as its (remote)
// parent. A parent traceparent (a serve question's HTTP request) gives
// the trace its id.
func ExampleContext(ctx context.Context, run, ex, parent string) context.Context {
	tid, sid := ExampleIDs(run, ex)
	if p, ok := ParseTraceparent(parent); ok {
		tid = p.TraceID()
	}
	sc := oteltrace.NewSpanContext(oteltrace.SpanContextConfig{TraceID: tid, SpanID: sid,
		TraceFlags: oteltrace.FlagsSampled, Remote: true})
	return oteltrace.ContextWithRemoteSpanContext(ctx, sc)
}

// EmitExample emits the example's root span, from start to end, with the
// ids every role's spans name as their parent.
func EmitExample(ctx context.Context, tracer oteltrace.Tracer, run, ex, parent string, start, end time.Time, attrs ...attribute.KeyValue) {
	if tracer == nil {
		return
	}
	tid, sid := ExampleIDs(run, ex)
	opts := []oteltrace.SpanStartOption{oteltrace.WithTimestamp(start), oteltrace.WithAttributes(
		append([]attribute.KeyValue{attribute.String("quorum.run", run), attribute.String("quorum.example", ex)}, attrs...)...)}
	if p, ok := ParseTraceparent(parent); ok {
		ctx = oteltrace.ContextWithRemoteSpanContext(ctx, p)
	} else {
		ctx = oteltrace.ContextWithSpanContext(ctx, oteltrace.SpanContext{})
		opts = append(opts, oteltrace.WithNewRoot())
	}
	_, span := tracer.Start(context.WithValue(ctx, wantKey{}, want{trace: tid, span: sid}), "example "+ex, opts...)
	span.End(oteltrace.WithTimestamp(end))
}

// ParseTraceparent reads a W3C traceparent header value.
func ParseTraceparent(s string) (oteltrace.SpanContext, bool) {
	if s == "" {
		return oteltrace.SpanContext{}, false
	}
	ctx := propagation.TraceContext{}.Extract(context.Background(), propagation.MapCarrier{"traceparent": s})
	sc := oteltrace.SpanContextFromContext(ctx)
	return sc, sc.IsValid()
}

// Traceparent is the W3C traceparent of ctx's span, "" for none.
func Traceparent(ctx context.Context) string {
	c := propagation.MapCarrier{}
	propagation.TraceContext{}.Inject(ctx, c)
	return c["traceparent"]
}

type wantKey struct{}

type want struct {
	trace oteltrace.TraceID
	span  oteltrace.SpanID
}

// ids generates random ids, except a span's the context asks for (an
// example's root).
type ids struct{}

func (ids) NewIDs(ctx context.Context) (oteltrace.TraceID, oteltrace.SpanID) {
	if w, ok := ctx.Value(wantKey{}).(want); ok {
		return w.trace, w.span
	}
	var tid oteltrace.TraceID
	var sid oteltrace.SpanID
	randomID(tid[:])
	randomID(sid[:])
	return tid, sid
}

func (ids) NewSpanID(ctx context.Context, _ oteltrace.TraceID) oteltrace.SpanID {
	if w, ok := ctx.Value(wantKey{}).(want); ok {
		return w.span
	}
	var sid oteltrace.SpanID
	randomID(sid[:])
	return sid
}

func randomID(b []byte) {
	for {
		if _, err := rand.Read(b); err != nil {
			panic(errors.New("crypto/rand failed: " + err.Error())) // never happens on Linux
		}
		for _, x := range b {
			if x != 0 {
				return
			}
		}
	}
}
