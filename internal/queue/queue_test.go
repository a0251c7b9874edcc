package queue_test

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/quorumsql/quorum/internal/queue"
	"github.com/quorumsql/quorum/internal/testutil/natstest"
	"github.com/quorumsql/quorum/internal/testutil/netcut"
	"github.com/quorumsql/quorum/internal/testutil/wait"
)

func connect(t *testing.T, cfg queue.Config) *queue.Queue {
	t.Helper()
	srv := natstest.Start(t)
	q, err := queue.Connect(context.Background(), srv.URL(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(q.Close)
	return q
}

type task struct {
	V int    `json:"v"`
	N string `json:"n"`
}

// run works the consumer until cond holds, then stops it.
func run(t *testing.T, q *queue.Queue, wc queue.WorkConfig, cond func() bool) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { q.Work(ctx, wc); close(done) }()
	defer func() { cancel(); <-done }()
	wait.For(t, time.Minute, "the handled messages", cond)
}

func TestPublishIsDeduplicated(t *testing.T) {
	t.Parallel()
	q := connect(t, queue.Config{})
	ctx := context.Background()
	subj := queue.Subject("r1", queue.StageGenerate, "sqlite")
	for i := 0; i < 3; i++ {
		if err := q.Publish(ctx, subj, "r1.ex1.0.0", task{V: queue.Version, N: "a"}); err != nil {
			t.Fatal(err)
		}
	}
	if err := q.Publish(ctx, subj, "r1.ex1.0.1", task{V: queue.Version, N: "b"}); err != nil {
		t.Fatal(err)
	}
	var got atomic.Int32
	run(t, q, queue.WorkConfig{Consumer: "gen-sqlite", Filters: []string{"quorum.*.generate.sqlite"},
		Handler: func(context.Context, queue.Delivery) error { got.Add(1); return nil }}, func() bool { return got.Load() >= 2 })
	// The worker has stopped: a third message would be handled or pending.
	if n, _ := q.Pending(ctx, "gen-sqlite"); got.Load() != 2 || n != 0 {
		t.Errorf("handled %d, pending %d; want 2 and 0", got.Load(), n)
	}
}

func TestRetriesThenGivesUpWithoutDropping(t *testing.T) {
	t.Parallel()
	q := connect(t, queue.Config{MaxDeliver: 3, AckWait: 2 * time.Second})
	ctx := context.Background()
	q.Publish(ctx, queue.Subject("r", queue.StageGenerate, "sqlite"), "bad", task{V: queue.Version, N: "bad"})
	q.Publish(ctx, queue.Subject("r", queue.StageGenerate, "sqlite"), "poison", task{V: queue.Version, N: "poison"})
	var mu sync.Mutex
	attempts := map[string]int{}
	var gaveUp []string
	wc := queue.WorkConfig{Consumer: "g", Filters: []string{"quorum.*.generate.sqlite"}, Concurrency: 2, RetryBase: 20 * time.Millisecond,
		Handler: func(_ context.Context, d queue.Delivery) error {
			var tk task
			if err := queue.Decode(d.Msg.Data(), &tk); err != nil {
				return queue.Permanent(err)
			}
			mu.Lock()
			attempts[tk.N]++
			mu.Unlock()
			if tk.N == "poison" {
				return queue.Permanent(errors.New("unknown example"))
			}
			return fmt.Errorf("transient failure %d", d.Attempt)
		},
		OnGiveUp: func(_ context.Context, d queue.Delivery, err error) {
			mu.Lock()
			gaveUp = append(gaveUp, fmt.Sprintf("%d:%v", d.Attempt, err))
			mu.Unlock()
		}}
	run(t, q, wc, func() bool { mu.Lock(); defer mu.Unlock(); return len(gaveUp) == 2 })
	mu.Lock()
	defer mu.Unlock()
	if attempts["bad"] != 3 || attempts["poison"] != 1 {
		t.Errorf("attempts %v, want bad 3 (MaxDeliver) and poison 1", attempts)
	}
}

// TestHeartbeatsPreventRedelivery: a handler that outlasts the AckWait,
// heartbeating, is not redelivered. It holds its message until four
// heartbeats have reached the server: a ticker's ticks come a third of the
// AckWait apart and never early, so the handler has outlasted an AckWait,
// measured by the heartbeats themselves rather than by a sleep. Each
// heartbeat leaves two thirds of the AckWait (2 s) of slack to a loaded
// machine.
func TestHeartbeatsPreventRedelivery(t *testing.T) {
	t.Parallel()
	srv := natstest.Start(t)
	ctx := context.Background()
	q, err := queue.Connect(ctx, srv.URL(), queue.Config{AckWait: 3 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(q.Close)
	// Heartbeats are "+WPI" acks: watch them go to the server.
	nc, err := nats.Connect(srv.URL())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(nc.Close)
	beats := make(chan struct{}, 64)
	if _, err := nc.Subscribe("$JS.ACK."+queue.Stream+".>", func(m *nats.Msg) {
		if string(m.Data) == "+WPI" {
			select {
			case beats <- struct{}{}:
			default:
			}
		}
	}); err != nil {
		t.Fatal(err)
	}
	if err := nc.Flush(); err != nil {
		t.Fatal(err)
	}
	q.Publish(ctx, queue.Subject("r", queue.StageExplore, "sqlite"), "slow", task{V: queue.Version})
	var deliveries, done atomic.Int32
	wc := queue.WorkConfig{Consumer: "e", Filters: []string{"quorum.*.explore.sqlite"}, Concurrency: 2,
		Handler: func(hctx context.Context, _ queue.Delivery) error {
			if deliveries.Add(1) > 1 {
				return nil // a redelivery: counted, and failed below
			}
			for i := range 4 {
				select {
				case <-beats:
				case <-hctx.Done():
					return hctx.Err()
				case <-time.After(time.Minute): // a failure's bound
					t.Errorf("heartbeat %d of 4 never reached the server", i+1)
					return nil
				}
			}
			done.Add(1)
			return nil
		}}
	run(t, q, wc, func() bool { return done.Load() >= 1 })
	if deliveries.Load() != 1 {
		t.Errorf("%d deliveries of a message held past its AckWait with heartbeats, want 1", deliveries.Load())
	}
}

func TestShutdownHandsBackInFlightWork(t *testing.T) {
	t.Parallel()
	// The AckWait is an hour: a redelivery within the test can only be
	// the hand-back's.
	q := connect(t, queue.Config{AckWait: time.Hour})
	q.Publish(context.Background(), queue.Subject("r", queue.StageGenerate, "sqlite"), "m", task{V: queue.Version})
	started := make(chan struct{}, 1)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		q.Work(ctx, queue.WorkConfig{Consumer: "g", Filters: []string{"quorum.*.generate.sqlite"}, DrainTimeout: 100 * time.Millisecond,
			Handler: func(hctx context.Context, _ queue.Delivery) error {
				started <- struct{}{}
				<-hctx.Done() // a long LLM call, cancelled by the drain timeout
				return hctx.Err()
			}})
		close(done)
	}()
	<-started
	cancel()
	<-done
	// Handed back with a plain Nak: another worker gets it at once, not
	// after the AckWait.
	var got atomic.Int32
	run(t, q, queue.WorkConfig{Consumer: "g", Filters: []string{"quorum.*.generate.sqlite"},
		Handler: func(_ context.Context, d queue.Delivery) error {
			if d.Attempt == 2 {
				got.Add(1)
			}
			return nil
		}}, func() bool { return got.Load() == 1 })
}

func TestDecodeChecksVersion(t *testing.T) {
	t.Parallel()
	var tk task
	if err := queue.Decode([]byte(`{"v":99,"n":"x"}`), &tk); err == nil {
		t.Error("a version 99 message was accepted")
	}
	if err := queue.Decode([]byte(`not json`), &tk); err == nil {
		t.Error("malformed message accepted")
	}
	if err := queue.CheckToken("run id", "bad.id"); err == nil {
		t.Error("a dotted run id was accepted")
	}
}

// TestUrgentLaneGoesFirst: with a backlog of batch work, messages on the
// urgent lane take the next free slot; the batch backlog still drains.
func TestUrgentLaneGoesFirst(t *testing.T) {
	t.Parallel()
	q := connect(t, queue.Config{})
	ctx := context.Background()
	for i := range 20 {
		if err := q.Publish(ctx, queue.Subject("batch", queue.StageGenerate, "sqlite"), fmt.Sprintf("b%d", i), task{V: queue.Version, N: fmt.Sprintf("b%d", i)}); err != nil {
			t.Fatal(err)
		}
	}
	var mu sync.Mutex
	var order []string
	inHand, release := make(chan struct{}), make(chan struct{})
	handler := func(_ context.Context, d queue.Delivery) error {
		var tk task
		if err := queue.Decode(d.Msg.Data(), &tk); err != nil {
			return err
		}
		mu.Lock()
		order = append(order, tk.N)
		first := len(order) == 1
		mu.Unlock()
		if first {
			inHand <- struct{}{}
			<-release
		}
		return nil
	}
	wctx, stop := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() {
		q.Work(wctx, queue.WorkConfig{Consumer: "generate-sqlite", Filters: []string{queue.Subject("*", queue.StageGenerate, "sqlite")}, Concurrency: 1,
			Urgent:  &queue.Lane{Consumer: "generate-now-sqlite", Filters: []string{queue.Subject("*", queue.Urgent(queue.StageGenerate), "sqlite")}},
			Handler: handler})
		close(done)
	}()
	defer func() { stop(); <-done }()
	// Questions arrive while the batch is under way: its first message is
	// in hand, holding the one slot.
	wait.Recv(t, time.Minute, "the first batch message in hand", inHand)
	for i := range 3 {
		if err := q.Publish(ctx, queue.Subject("ask", queue.Urgent(queue.StageGenerate), "sqlite"), fmt.Sprintf("u%d", i), task{V: queue.Version, N: fmt.Sprintf("u%d", i)}); err != nil {
			t.Fatal(err)
		}
	}
	wait.For(t, time.Minute, "the questions pending on the urgent lane", func() bool {
		n, err := q.Pending(ctx, "generate-now-sqlite")
		return err == nil && n == 3
	})
	close(release)
	wait.For(t, time.Minute, "every message handled", func() bool { mu.Lock(); defer mu.Unlock(); return len(order) == 23 })
	mu.Lock()
	defer mu.Unlock()
	// One slot: the batch message in hand when the questions came, then
	// the questions, then the rest of the batch.
	for i, n := range order[1:4] {
		if n != fmt.Sprintf("u%d", i) {
			t.Fatalf("order %v: the urgent messages did not take the next slots", order)
		}
	}
}

// TestASilentCutIsNoticed: a link that stops delivering without closing
// (a partition) is noticed by the connection's pings, derived from the ack
// wait, not after the client's default two minutes of them; healed, the
// connection comes back.
func TestASilentCutIsNoticed(t *testing.T) {
	t.Parallel()
	srv := natstest.Start(t)
	u, err := url.Parse(srv.URL())
	if err != nil {
		t.Fatal(err)
	}
	link := netcut.Start(t, netcut.Config{Target: u.Host})
	lost, back := make(chan struct{}, 1), make(chan struct{}, 1)
	signal := func(c chan struct{}) {
		select {
		case c <- struct{}{}:
		default:
		}
	}
	q, err := queue.Connect(context.Background(), "nats://"+link.Addr(), queue.Config{AckWait: 3 * time.Second},
		nats.DisconnectErrHandler(func(*nats.Conn, error) { signal(lost) }),
		nats.ReconnectHandler(func(*nats.Conn) { signal(back) }))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(q.Close)
	link.Cut()
	wait.Recv(t, time.Minute, "the connection noticing the cut (pings every 2 s, 2 outstanding)", (<-chan struct{})(lost))
	link.Heal()
	wait.Recv(t, time.Minute, "the connection back after the link healed", (<-chan struct{})(back))
}
