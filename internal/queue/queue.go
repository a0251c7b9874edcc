// Package queue is quorum's messaging over NATS JetStream: one work-queue
// stream, subjects that carry the run, the stage and the warehouse (so
// workers scale per warehouse quota and filter what they take), durable pull
// consumers per role, deduplicated publishes, and a worker loop with
// in-progress heartbeats and bounded redelivery. Core NATS pub/sub is never
// used for work.
package queue

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"regexp"
	"strings"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"go.opentelemetry.io/otel/propagation"
	oteltrace "go.opentelemetry.io/otel/trace"

	"github.com/quorumsql/quorum/internal/redact"
)

// Stream is the JetStream stream holding all of quorum's work.
const Stream = "QUORUM"

// Stages of the pipeline, as subject tokens: the two worker pools' tasks,
// candidate results for the voter, final answers for the coordinator.
const (
	StageGenerate = "generate"
	StageExplore  = "explore"
	StageResult   = "result"
	StageFinal    = "final"
)

var token = regexp.MustCompile(`^[A-Za-z0-9_-]+$`)

// CheckToken validates a run id or warehouse name for use in subjects.
func CheckToken(kind, s string) error {
	if !token.MatchString(s) {
		return fmt.Errorf("%s %q: use letters, digits, '-' and '_' only", kind, s)
	}
	return nil
}

// Urgent is the stage of a pool's urgent lane ("generate" → "generate-now"),
// which workers drain before the pool's batch work.
func Urgent(stage string) string { return stage + "-now" }

// Subject is quorum.<run>.<stage>[.<warehouse>].
func Subject(run, stage, warehouse string) string {
	if warehouse == "" {
		return "quorum." + run + "." + stage
	}
	return "quorum." + run + "." + stage + "." + warehouse
}

// RunSubjects matches every subject of run: its stages, pools and urgent
// lanes.
func RunSubjects(run string) string { return "quorum." + run + ".>" }

// Config configures the queue.
type Config struct {
	// AckWait is how long a delivery may go without an ack or a heartbeat
	// (default 60s); workers heartbeat at a third of it.
	AckWait time.Duration
	// MaxDeliver bounds deliveries per message (default 5).
	MaxDeliver int
	// DuplicateWindow is how long a Nats-Msg-Id is remembered (default 2h).
	DuplicateWindow time.Duration
	// Replicas for the streams: how many JetStream servers keep a copy,
	// so a run survives losing a machine (3 on a three-node cluster). 0
	// keeps what the streams have (1 when creating them): a worker never
	// changes them. A stream is never scaled down, whoever asks: an
	// operator's R3 stays R3.
	Replicas int
}

// Pings is the connection's keepalive, from the ack wait: a link cut
// silently (nothing closed, nothing delivered) is noticed after
// outstanding unanswered pings: within a third to a half of the ack wait,
// 4 s at least (a loaded machine's pause is not a partition) and 30 s at
// most (the client's default pings every 2 minutes), so the worker
// stops fetching into a dead link and reconnects. What a cut worker holds
// is redelivered once the ack wait passes without its heartbeats, and run
// by another once its task lease lapses too.
func (c Config) Pings() (every time.Duration, outstanding int) {
	c.defaults()
	return min(max(c.AckWait/6, 2*time.Second), 10*time.Second), 2
}

func (c *Config) defaults() {
	if c.AckWait <= 0 {
		c.AckWait = 60 * time.Second
	}
	if c.MaxDeliver <= 0 {
		c.MaxDeliver = 5
	}
	if c.DuplicateWindow <= 0 {
		c.DuplicateWindow = 2 * time.Hour
	}
}

// Queue is a connection to quorum's stream.
type Queue struct {
	cfg        Config
	nc         *nats.Conn
	js         jetstream.JetStream
	stream     jetstream.Stream
	advisories jetstream.Stream
	// closed is closed once the connection is.
	closed chan struct{}
}

// Connect dials NATS (url may carry credentials; TLS with tls://) and makes
// sure the stream exists.
func Connect(ctx context.Context, url string, cfg Config, opts ...nats.Option) (*Queue, error) {
	cfg.defaults()
	closed := make(chan struct{})
	every, outstanding := cfg.Pings()
	opts = append([]nats.Option{nats.MaxReconnects(-1), nats.ReconnectWait(time.Second), nats.Name("quorum"),
		nats.PingInterval(every), nats.MaxPingsOutstanding(outstanding)}, opts...)
	opts = append(opts, nats.ClosedHandler(func(*nats.Conn) { close(closed) }))
	nc, err := nats.Connect(url, opts...)
	if err != nil {
		return nil, fmt.Errorf("connect to NATS at %s: %w", redact.URL(url), err)
	}
	js, err := jetstream.New(nc)
	if err != nil {
		nc.Close()
		return nil, err
	}
	st, err := ensureStream(ctx, js, jetstream.StreamConfig{
		Name: Stream, Subjects: []string{"quorum.>"}, Retention: jetstream.WorkQueuePolicy,
		Storage: jetstream.FileStorage, Duplicates: cfg.DuplicateWindow, Replicas: cfg.Replicas,
		MaxAge: 14 * 24 * time.Hour,
	})
	if err != nil {
		nc.Close()
		return nil, fmt.Errorf("create stream %s (is JetStream enabled on the server?): %w", Stream, err)
	}
	// JetStream announces a message whose deliveries ran out on a core
	// subject; this stream keeps those announcements until a voter has
	// recorded the lost task's outcome, whoever held its last delivery.
	adv, err := ensureStream(ctx, js, jetstream.StreamConfig{
		Name: AdvisoryStream, Subjects: []string{"$JS.EVENT.ADVISORY.CONSUMER.MAX_DELIVERIES." + Stream + ".>"},
		Retention: jetstream.WorkQueuePolicy, Storage: jetstream.FileStorage, Replicas: cfg.Replicas, MaxAge: 14 * 24 * time.Hour,
	})
	if err != nil {
		nc.Close()
		return nil, fmt.Errorf("create stream %s: %w", AdvisoryStream, err)
	}
	cfg.Replicas = st.CachedInfo().Config.Replicas
	return &Queue{cfg: cfg, nc: nc, js: js, stream: st, advisories: adv, closed: closed}, nil
}

// ensureStream creates the stream with want, or updates an existing one to
// want with as many replicas as it has or want asks, whichever is more.
func ensureStream(ctx context.Context, js jetstream.JetStream, want jetstream.StreamConfig) (st jetstream.Stream, err error) {
	err = retryAPI(ctx, "stream "+want.Name, func() (err error) {
		st, err = ensureStreamOnce(ctx, js, want)
		return err
	})
	return st, err
}

func ensureStreamOnce(ctx context.Context, js jetstream.JetStream, want jetstream.StreamConfig) (jetstream.Stream, error) {
	st, err := js.Stream(ctx, want.Name)
	if errors.Is(err, jetstream.ErrStreamNotFound) {
		if want.Replicas <= 0 {
			want.Replicas = 1
		}
		st, err = js.CreateStream(ctx, want)
		if !errors.Is(err, jetstream.ErrStreamNameAlreadyInUse) {
			return st, replicasErr(err, want.Replicas)
		}
		// Another process created it meanwhile: update it as below.
		st, err = js.Stream(ctx, want.Name)
	}
	if err != nil {
		return nil, err
	}
	want.Replicas = max(want.Replicas, st.CachedInfo().Config.Replicas)
	st, err = js.UpdateStream(ctx, want)
	return st, replicasErr(err, want.Replicas)
}

// RaiseReplicas gives quorum's streams at least n replicas (never fewer
// than they have) and returns how many they keep: a resumed run whose
// manifest records more than the streams now have (they were recreated)
// gets its replicas back. The connection's Config is left as it was.
func (q *Queue) RaiseReplicas(ctx context.Context, n int) (int, error) {
	var got int
	for _, st := range []jetstream.Stream{q.stream, q.advisories} {
		want := st.CachedInfo().Config
		want.Replicas = n
		s, err := ensureStream(ctx, q.js, want)
		if err != nil {
			return 0, fmt.Errorf("stream %s to %d replicas: %w", want.Name, n, err)
		}
		if want.Name == Stream {
			got = s.CachedInfo().Config.Replicas
		}
	}
	return got, nil
}

// replicasErr says what to do when the servers cannot hold the replicas.
func replicasErr(err error, replicas int) error {
	if err != nil && replicas > 1 && strings.Contains(strings.ToLower(err.Error()), "replicas") {
		return fmt.Errorf("%w: %d replicas need a JetStream cluster of at least %d servers (--stream-replicas)", err, replicas, replicas)
	}
	return err
}

// AdvisoryStream keeps JetStream's max-deliveries advisories for QUORUM.
const AdvisoryStream = "QUORUM_ADVISORIES"

// Connected reports whether the NATS connection is up.
func (q *Queue) Connected() bool { return q.nc.IsConnected() }

// closeWait bounds how long Close waits for the drain.
const closeWait = 10 * time.Second

// Close drains the connection (what it publishes is flushed, what its
// subscriptions hold is handled) and returns once it is closed.
func (q *Queue) Close() {
	if err := q.nc.Drain(); err != nil {
		q.nc.Close() // closed already, or draining failed: close at once
	}
	t := time.NewTimer(closeWait)
	defer t.Stop()
	select {
	case <-q.closed:
	case <-t.C:
		q.nc.Close()
	}
}

// Config returns the effective configuration.
func (q *Queue) Config() Config { return q.cfg }

// Publish sends v to subject with a message id; a retried publish with the
// same id is dropped by JetStream within the duplicate window, so it never
// creates a second task.
func (q *Queue) Publish(ctx context.Context, subject, msgID string, v any) error {
	data, err := json.Marshal(v)
	if err != nil {
		return err
	}
	msg := &nats.Msg{Subject: subject, Data: data}
	if sc := oteltrace.SpanContextFromContext(ctx); sc.IsValid() {
		// The W3C trace context of the span that published: the
		// message's handler continues the example's one trace.
		msg.Header = nats.Header{}
		propagation.TraceContext{}.Inject(ctx, headerCarrier(msg.Header))
	}
	var last error
	for attempt := 0; attempt < 5; attempt++ {
		_, err := q.js.PublishMsg(ctx, msg, jetstream.WithMsgID(msgID))
		if err == nil {
			return nil
		}
		last = err
		if ctx.Err() != nil {
			break
		}
		time.Sleep(time.Duration(attempt+1) * 200 * time.Millisecond)
	}
	return fmt.Errorf("publish %s (%s): %w", subject, msgID, last)
}

// headerCarrier carries the W3C trace context in NATS headers, keys as
// written (NATS headers are not canonicalised).
type headerCarrier nats.Header

func (h headerCarrier) Get(key string) string { return nats.Header(h).Get(key) }
func (h headerCarrier) Set(key, value string) { nats.Header(h).Set(key, value) }
func (h headerCarrier) Keys() []string {
	keys := make([]string, 0, len(h))
	for k := range h {
		keys = append(keys, k)
	}
	return keys
}

// TraceContext returns ctx with the trace context a message carries as its
// remote parent (ctx unchanged when it carries none).
func TraceContext(ctx context.Context, m jetstream.Msg) context.Context {
	h := m.Headers()
	if len(h) == 0 {
		return ctx
	}
	return propagation.TraceContext{}.Extract(ctx, headerCarrier(h))
}

// Consumer creates (or updates) the durable pull consumer named name over
// the given subject filters. Filters of different consumers must not
// overlap on the work-queue stream.
func (q *Queue) Consumer(ctx context.Context, name string, filters ...string) (jetstream.Consumer, error) {
	return q.consumer(ctx, q.stream, name, q.cfg.MaxDeliver, filters...)
}

// consumer creates a durable pull consumer on st; maxDeliver -1 delivers
// without limit.
func (q *Queue) consumer(ctx context.Context, st jetstream.Stream, name string, maxDeliver int, filters ...string) (jetstream.Consumer, error) {
	var c jetstream.Consumer
	err := retryAPI(ctx, "creating consumer "+name, func() (err error) {
		c, err = st.CreateOrUpdateConsumer(ctx, jetstream.ConsumerConfig{
			Durable: name, FilterSubjects: filters, AckPolicy: jetstream.AckExplicitPolicy,
			AckWait: q.cfg.AckWait, MaxDeliver: maxDeliver, MaxAckPending: 10_000,
		})
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("consumer %s on %v: %w", name, filters, err)
	}
	return c, nil
}

// DeleteConsumer removes a durable consumer (a finished run's).
func (q *Queue) DeleteConsumer(ctx context.Context, name string) error {
	err := q.stream.DeleteConsumer(ctx, name)
	if errors.Is(err, jetstream.ErrConsumerNotFound) {
		return nil
	}
	return err
}

// ConsumerNames lists the stream's durable consumers whose names begin
// with prefix.
func (q *Queue) ConsumerNames(ctx context.Context, prefix string) ([]string, error) {
	var out []string
	names := q.stream.ConsumerNames(ctx)
	for name := range names.Name() {
		if strings.HasPrefix(name, prefix) {
			out = append(out, name)
		}
	}
	if err := names.Err(); err != nil {
		return nil, fmt.Errorf("listing the consumers of %s: %w", Stream, err)
	}
	return out, nil
}

// PurgeRun removes every message left on run's subjects (a finished run's:
// tasks of rounds decided without them, duplicates, finals already
// recorded) and returns how many there were, so that no worker runs them
// after the run's state was retired.
func (q *Queue) PurgeRun(ctx context.Context, run string) (uint64, error) {
	if err := CheckToken("run id", run); err != nil {
		return 0, err
	}
	n, err := q.RunMessages(ctx, run)
	if err != nil {
		return 0, err
	}
	if err := q.stream.Purge(ctx, jetstream.WithPurgeSubject(RunSubjects(run))); err != nil {
		return 0, fmt.Errorf("purge the subjects of run %s: %w", run, err)
	}
	return n, nil
}

// RunMessages counts the messages on run's subjects.
func (q *Queue) RunMessages(ctx context.Context, run string) (uint64, error) {
	info, err := q.stream.Info(ctx, jetstream.WithSubjectFilter(RunSubjects(run)))
	if err != nil {
		return 0, fmt.Errorf("messages of run %s: %w", run, err)
	}
	var n uint64
	for _, c := range info.State.Subjects {
		n += c
	}
	return n, nil
}

// Pending reports the messages waiting or unacknowledged on a consumer.
func (q *Queue) Pending(ctx context.Context, name string) (int, error) {
	c, err := q.stream.Consumer(ctx, name)
	if err != nil {
		return 0, err
	}
	info, err := c.Info(ctx)
	if err != nil {
		return 0, err
	}
	return int(info.NumPending) + info.NumAckPending, nil
}

// Version is the message schema version. A consumer refuses (terminates)
// messages of another version rather than misreading them.
const Version = 2

// Decode reads a message body into v and checks its version and, when v
// has a Validate method, its fields. Callers terminate what fails.
func Decode(data []byte, v any) error {
	var head struct {
		V int `json:"v"`
	}
	if err := json.Unmarshal(data, &head); err != nil {
		return fmt.Errorf("malformed message: %w", err)
	}
	if head.V != Version {
		return fmt.Errorf("message schema version %d, this build reads %d", head.V, Version)
	}
	if err := json.Unmarshal(data, v); err != nil {
		return fmt.Errorf("malformed message: %w", err)
	}
	if c, ok := v.(validator); ok {
		return c.Validate()
	}
	return nil
}

// validator is a message that checks its own fields: anyone who can
// publish to a stream can send one, and its names become keys and paths.
type validator interface{ Validate() error }
