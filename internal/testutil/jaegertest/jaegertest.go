// Package jaegertest starts a real Jaeger (v2 all-in-one, in-memory
// storage) as a process on loopback ports for tests, and reads back what it
// stored through Jaeger's HTTP query API, so a test proves its spans
// against the backend users run rather than against an in-process
// recorder. Jaeger is built from the Go module proxy by the tool module
// tools/jaeger into bin/jaeger (make jaeger), on demand when missing.
package jaegertest

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/quorumsql/quorum/internal/testutil/tier"
	"github.com/quorumsql/quorum/internal/testutil/wait"
)

// BinEnv names a Jaeger binary to use instead of bin/jaeger.
const BinEnv = "QUORUM_JAEGER_BIN"

// Jaeger is a running Jaeger all-in-one process.
type Jaeger struct {
	otlpHTTP, otlpGRPC, query string // host:port
	logs                      *logBuffer
	client                    *http.Client
}

// ErrNotFound is what Trace returns for a trace Jaeger does not have.
var ErrNotFound = errors.New("jaeger: trace not found")

// config is Jaeger v2's all-in-one configuration (an OpenTelemetry
// Collector configuration) cut to what a test needs: the OTLP receiver,
// memory storage, the query API. No internal metrics, which would listen
// on a fixed port and collide with a second Jaeger, and no traces of its
// own queries, which it would send to localhost:4317 (nobody there) and
// wait for at shutdown.
const config = `service:
  extensions: [jaeger_storage, jaeger_query]
  pipelines:
    traces:
      receivers: [otlp]
      exporters: [jaeger_storage_exporter]
  telemetry:
    metrics:
      level: none
    logs:
      level: info
extensions:
  jaeger_storage:
    backends:
      memstore:
        memory:
          max_traces: 100000
  jaeger_query:
    storage:
      traces: memstore
    enable_tracing: false
    http:
      endpoint: %s
    grpc:
      endpoint: %s
receivers:
  otlp:
    protocols:
      grpc:
        endpoint: %s
      http:
        endpoint: %s
exporters:
  jaeger_storage_exporter:
    trace_storage: memstore
`

// Start builds bin/jaeger when it is missing or older than the tool
// module (skipping the test, saying why, only when that build fails),
// starts it on free loopback ports and waits until its OTLP receivers and
// query API answer. The process is stopped when the test ends; its log is
// printed if the test failed.
func Start(t testing.TB) *Jaeger {
	t.Helper()
	tier.Servers(t, "Jaeger")
	bin := binary(t)
	// A port picked free can be taken before Jaeger binds it; then Jaeger
	// exits and another set is tried.
	var lastLog string
	for range 3 {
		j, exited := start(t, bin)
		ready := func() bool { return j.ready() }
		done := false
		wait.For(t, 90*time.Second, "Jaeger to answer on its OTLP and query ports", func() bool {
			select {
			case <-exited:
				done = true
				return true
			default:
			}
			return ready()
		})
		if !done {
			return j
		}
		lastLog = j.logs.String()
		if !strings.Contains(lastLog, "address already in use") {
			break
		}
	}
	t.Fatalf("jaeger exited before it was ready:\n%s", lastLog)
	return nil
}

func start(t testing.TB, bin string) (*Jaeger, <-chan struct{}) {
	t.Helper()
	ports := freePorts(t, 4)
	j := &Jaeger{query: ports[0], otlpGRPC: ports[2], otlpHTTP: ports[3], logs: &logBuffer{},
		client: &http.Client{Timeout: 10 * time.Second}}
	cfg := filepath.Join(t.TempDir(), "jaeger.yaml")
	if err := os.WriteFile(cfg, fmt.Appendf(nil, config, ports[0], ports[1], ports[2], ports[3]), 0o600); err != nil {
		t.Fatalf("jaeger config: %v", err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cmd := exec.CommandContext(ctx, bin, "--config", cfg)
	cmd.Stdout, cmd.Stderr = j.logs, j.logs
	// Stopped with SIGTERM (a clean collector shutdown), killed if it
	// takes longer than WaitDelay.
	cmd.Cancel = func() error { return cmd.Process.Signal(syscall.SIGTERM) }
	cmd.WaitDelay = 15 * time.Second
	if err := cmd.Start(); err != nil {
		cancel()
		t.Fatalf("starting %s: %v", bin, err)
	}
	exited := make(chan struct{})
	go func() {
		_ = cmd.Wait()
		close(exited)
	}()
	t.Cleanup(func() {
		cancel()
		<-exited
		if t.Failed() {
			t.Logf("jaeger log (last 8 KB):\n%s", tail(j.logs.String(), 8<<10))
		}
	})
	return j, exited
}

// ready: the query API answers and both OTLP ports accept connections.
// Collector extensions start before pipelines, so the query API alone
// does not mean the receivers listen.
func (j *Jaeger) ready() bool {
	for _, addr := range []string{j.otlpGRPC, j.otlpHTTP} {
		c, err := net.DialTimeout("tcp", addr, 2*time.Second)
		if err != nil {
			return false
		}
		c.Close()
	}
	_, err := j.Services(context.Background())
	return err == nil
}

// OTLPEndpoint is the OTLP/HTTP endpoint, http://127.0.0.1:PORT, as
// OTEL_EXPORTER_OTLP_ENDPOINT takes it (the exporter adds /v1/traces).
func (j *Jaeger) OTLPEndpoint() string { return "http://" + j.otlpHTTP }

// OTLPGRPCEndpoint is the OTLP/gRPC endpoint, http://127.0.0.1:PORT
// (plaintext), as OTEL_EXPORTER_OTLP_ENDPOINT takes it with
// OTEL_EXPORTER_OTLP_PROTOCOL=grpc.
func (j *Jaeger) OTLPGRPCEndpoint() string { return "http://" + j.otlpGRPC }

// QueryURL is the base of the query API and the UI, http://127.0.0.1:PORT.
func (j *Jaeger) QueryURL() string { return "http://" + j.query }

// Logs returns what Jaeger has written so far.
func (j *Jaeger) Logs() string { return j.logs.String() }

// Trace is one trace as Jaeger's query API (/api/traces) returns it.
type Trace struct {
	TraceID   string             `json:"traceID"`
	Spans     []Span             `json:"spans"`
	Processes map[string]Process `json:"processes"`
	Warnings  []string           `json:"warnings"`
}

// Span is one span of a Trace. StartTime and Duration are microseconds.
type Span struct {
	TraceID       string      `json:"traceID"`
	SpanID        string      `json:"spanID"`
	OperationName string      `json:"operationName"`
	References    []Reference `json:"references"`
	StartTime     int64       `json:"startTime"`
	Duration      int64       `json:"duration"`
	Tags          []KeyValue  `json:"tags"`
	ProcessID     string      `json:"processID"`
	Warnings      []string    `json:"warnings"`
	// Process is the span's process (its service and resource
	// attributes), filled in from the trace's processes.
	Process Process `json:"-"`
}

// Reference links a span to another: CHILD_OF for its parent.
type Reference struct {
	RefType string `json:"refType"`
	TraceID string `json:"traceID"`
	SpanID  string `json:"spanID"`
}

// Process is the service that sent spans, with its resource attributes.
type Process struct {
	ServiceName string     `json:"serviceName"`
	Tags        []KeyValue `json:"tags"`
}

// KeyValue is an attribute. Type is Jaeger's: string, bool, int64,
// float64 or binary. Numbers are json.Number, exact as Jaeger sent them.
type KeyValue struct {
	Key   string `json:"key"`
	Type  string `json:"type"`
	Value any    `json:"value"`
}

// Tag returns the value of the span's attribute key as text (numbers as
// Jaeger wrote them) and whether the span has it.
func (s Span) Tag(key string) (string, bool) { return tag(s.Tags, key) }

// Parent is the span ID of the span's parent (its CHILD_OF reference), ""
// for a root span.
func (s Span) Parent() string {
	for _, r := range s.References {
		if r.RefType == "CHILD_OF" {
			return r.SpanID
		}
	}
	return ""
}

// Tag returns the value of the process's resource attribute key as text.
func (p Process) Tag(key string) (string, bool) { return tag(p.Tags, key) }

func tag(kvs []KeyValue, key string) (string, bool) {
	for _, kv := range kvs {
		if kv.Key == key {
			return fmt.Sprint(kv.Value), true
		}
	}
	return "", false
}

// Services lists the service names of the trace's spans, sorted, once
// each.
func (tr Trace) Services() []string {
	seen := map[string]bool{}
	var out []string
	for _, s := range tr.Spans {
		if n := s.Process.ServiceName; !seen[n] {
			seen[n] = true
			out = append(out, n)
		}
	}
	slices.Sort(out)
	return out
}

// Span returns the trace's span with the given ID.
func (tr Trace) Span(id string) (Span, bool) {
	for _, s := range tr.Spans {
		if s.SpanID == id {
			return s, true
		}
	}
	return Span{}, false
}

// Named returns the trace's spans whose operation name is name.
func (tr Trace) Named(name string) []Span {
	var out []Span
	for _, s := range tr.Spans {
		if s.OperationName == name {
			out = append(out, s)
		}
	}
	return out
}

// Services lists the services Jaeger has spans of.
func (j *Jaeger) Services(ctx context.Context) ([]string, error) {
	var out []string
	if err := j.get(ctx, "/api/services", nil, &out); err != nil {
		return nil, err
	}
	slices.Sort(out)
	return out, nil
}

// Traces returns the traces with spans of service (up to limit; 0 is
// Jaeger's default of 100) from the last two days.
func (j *Jaeger) Traces(ctx context.Context, service string, limit int) ([]Trace, error) {
	return j.Find(ctx, Query{Service: service, Limit: limit})
}

// Query selects traces: those with a span of Service (required) named
// Operation (any when empty) that has every attribute of Tags, from the
// last two days.
type Query struct {
	Service   string
	Operation string
	Tags      map[string]string
	// Limit is the most traces returned; 0 is Jaeger's default of 100.
	Limit int
}

// Find returns the traces q selects, whole (every span, from every
// service).
func (j *Jaeger) Find(ctx context.Context, q Query) ([]Trace, error) {
	v := url.Values{"service": {q.Service}}
	if q.Operation != "" {
		v.Set("operation", q.Operation)
	}
	if len(q.Tags) > 0 {
		b, err := json.Marshal(q.Tags)
		if err != nil {
			return nil, fmt.Errorf("jaeger query tags %v: %w", q.Tags, err)
		}
		v.Set("tags", string(b))
	}
	if q.Limit > 0 {
		v.Set("limit", fmt.Sprint(q.Limit))
	}
	var out []Trace
	if err := j.get(ctx, "/api/traces", v, &out); err != nil {
		return nil, err
	}
	return out, nil
}

// Trace returns the trace with the given ID (hex, as the SDK's
// TraceID.String gives it), or ErrNotFound.
func (j *Jaeger) Trace(ctx context.Context, traceID string) (Trace, error) {
	var out []Trace
	if err := j.get(ctx, "/api/traces/"+url.PathEscape(traceID), nil, &out); err != nil {
		return Trace{}, err
	}
	if len(out) != 1 {
		return Trace{}, fmt.Errorf("jaeger trace %s: %d traces in the answer: %w", traceID, len(out), ErrNotFound)
	}
	return out[0], nil
}

// WaitTrace polls Trace until the trace is there and cond holds for it
// (cond nil: any), failing the test after timeout with what it last saw.
// Spans of one trace arrive from each process's exporter on its own
// schedule, so a test waits for all it expects.
func (j *Jaeger) WaitTrace(t testing.TB, timeout time.Duration, traceID string, cond func(Trace) bool) Trace {
	t.Helper()
	var tr Trace
	var last error
	// wait.For ends the test with Goexit, which runs this: say what was
	// there.
	defer func() {
		if t.Failed() {
			t.Logf("trace %s in Jaeger: last error %v; last seen %d spans from %v", traceID, last, len(tr.Spans), tr.Services())
		}
	}()
	wait.For(t, timeout, "trace "+traceID+" in Jaeger", func() bool {
		got, err := j.Trace(context.Background(), traceID)
		last = err
		if err != nil {
			return false
		}
		tr = got
		return cond == nil || cond(tr)
	})
	return tr
}

// get fetches path from the query API and decodes the answer's data into
// out. Jaeger answers {"data": ..., "errors": [...]}.
func (j *Jaeger) get(ctx context.Context, path string, q url.Values, out any) error {
	u := j.QueryURL() + path
	if len(q) > 0 {
		u += "?" + q.Encode()
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u, nil)
	if err != nil {
		return fmt.Errorf("jaeger query %s: %w", u, err)
	}
	resp, err := j.client.Do(req)
	if err != nil {
		return fmt.Errorf("jaeger query %s: %w", u, err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		return fmt.Errorf("jaeger query %s: %w", u, err)
	}
	if resp.StatusCode == http.StatusNotFound {
		return fmt.Errorf("jaeger query %s: %w", u, ErrNotFound)
	}
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("jaeger query %s: %s: %.500s", u, resp.Status, body)
	}
	var env struct {
		Data   json.RawMessage `json:"data"`
		Errors []struct {
			Code int    `json:"code"`
			Msg  string `json:"msg"`
		} `json:"errors"`
	}
	if err := json.Unmarshal(body, &env); err != nil {
		return fmt.Errorf("jaeger query %s: %w: %.500s", u, err, body)
	}
	if len(env.Errors) > 0 {
		return fmt.Errorf("jaeger query %s: %s (code %d)", u, env.Errors[0].Msg, env.Errors[0].Code)
	}
	d := json.NewDecoder(bytes.NewReader(env.Data))
	d.UseNumber()
	if err := d.Decode(out); err != nil {
		return fmt.Errorf("jaeger query %s: %w", u, err)
	}
	if traces, ok := out.(*[]Trace); ok {
		for i := range *traces {
			tr := &(*traces)[i]
			for k := range tr.Spans {
				tr.Spans[k].Process = tr.Processes[tr.Spans[k].ProcessID]
			}
		}
	}
	return nil
}

// freePorts returns n distinct free loopback addresses, holding each open
// until all are picked so none is picked twice.
func freePorts(t testing.TB, n int) []string {
	t.Helper()
	var ls []net.Listener
	defer func() {
		for _, l := range ls {
			l.Close()
		}
	}()
	out := make([]string, n)
	for i := range out {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatalf("free port: %v", err)
		}
		ls = append(ls, l)
		out[i] = l.Addr().String()
	}
	return out
}

// logBuffer collects the process's output; the process writes while the
// test reads.
type logBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *logBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *logBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

func tail(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return "..." + s[len(s)-n:]
}
