package queue

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"sync"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"go.uber.org/zap"

	"github.com/quorumsql/quorum/pkg/slot"
)

// Delivery is one delivery of a message to a handler.
type Delivery struct {
	Msg jetstream.Msg
	// Attempt counts deliveries from 1; Last is set on the final one a
	// consumer allows.
	Attempt int
	Last    bool
}

// Handler processes one message. nil acknowledges it. A Permanent error
// terminates it at once. Any other error asks for a redelivery with backoff,
// unless this was the last delivery: then OnGiveUp runs and the message is
// terminated, so it is never silently dropped.
type Handler func(ctx context.Context, d Delivery) error

type permanent struct{ err error }

func (p permanent) Error() string { return p.err.Error() }
func (p permanent) Unwrap() error { return p.err }

// Permanent marks an error that redelivery cannot fix (a malformed message,
// an unknown example).
func Permanent(err error) error { return permanent{err} }

// WorkConfig configures a worker loop.
type WorkConfig struct {
	Consumer    string
	Filters     []string
	Concurrency int
	// MaxHeld is how many messages the loop holds at once, running or
	// waiting (default Concurrency). A handler waiting under slot.Idle
	// leaves its slot to another, so a loop holding more than it runs
	// keeps the LLM busy while its tasks wait for replies.
	MaxHeld int
	Handler Handler
	// OnGiveUp reports a message that will not be delivered again (its
	// deliveries are exhausted, or it is permanently bad), so the run can
	// record the failure and go on.
	OnGiveUp func(ctx context.Context, d Delivery, err error)
	// DrainTimeout is how long in-flight work may finish after ctx ends
	// before it is handed back for redelivery (default 30s).
	DrainTimeout time.Duration
	// RetryBase is the first redelivery delay, doubled per attempt up to 30s
	// (default 1s).
	RetryBase time.Duration
	Logger    *zap.Logger
	// Observe, when set, is told each outcome ("ack", "retry", "gave_up",
	// "handed_back") and whether the message was a redelivery.
	Observe func(outcome string, redelivered bool)
	// MaxDeliver overrides the queue's deliveries per message for this
	// consumer; -1 delivers until the message is handled (the voter must
	// never drop a result).
	MaxDeliver int
	// Unstarted, when positive, is how many deliveries beyond MaxDeliver a
	// message may have: deliveries that died before starting its work (a
	// worker killed while it waited for a dead holder's lease) are not the
	// message's fault. The handler then counts the runs itself and returns
	// Permanent when its last allowed run fails; Delivery.Last is the
	// final of the MaxDeliver+Unstarted deliveries.
	Unstarted int
	// Transient tells an error of the infrastructure (Redis or NATS down)
	// from the task's own. A transient error does not use up a delivery:
	// the worker keeps the message (heartbeating), waits with WaitReady
	// until its dependencies answer, and runs the handler again, for up to
	// HoldFor (default 15 minutes).
	Transient func(error) bool
	WaitReady func(ctx context.Context) error
	HoldFor   time.Duration
	// Urgent, when set, is a second consumer drained first: whenever a
	// slot frees, its messages (interactive questions' tasks) are taken
	// before the batch consumer's.
	Urgent *Lane
}

// Lane is a consumer of its own within one worker loop.
type Lane struct {
	Consumer string
	Filters  []string
}

// fetchWait is how long a fetch waits on the server for messages. A
// stopping loop waits for its last fetch to end (handing back what it
// still brings), so it bounds how long stopping takes; an idle consumer
// asks again this often.
const fetchWait = 250 * time.Millisecond

// Work fetches and handles messages until ctx ends, then stops fetching,
// lets in-flight work finish (or hands it back after DrainTimeout), and
// returns.
func (q *Queue) Work(ctx context.Context, wc WorkConfig) error {
	return q.work(ctx, q.stream, wc)
}

func (q *Queue) work(ctx context.Context, st jetstream.Stream, wc WorkConfig) error {
	if wc.Concurrency <= 0 {
		wc.Concurrency = 1
	}
	if wc.DrainTimeout <= 0 {
		wc.DrainTimeout = 30 * time.Second
	}
	if wc.RetryBase <= 0 {
		wc.RetryBase = time.Second
	}
	if wc.Logger == nil {
		wc.Logger = zap.NewNop()
	}
	if wc.MaxDeliver == 0 {
		wc.MaxDeliver = q.cfg.MaxDeliver
	}
	if wc.HoldFor <= 0 {
		wc.HoldFor = 15 * time.Minute
	}
	if wc.MaxDeliver > 0 && wc.Unstarted > 0 {
		wc.MaxDeliver += wc.Unstarted
	}
	cons, err := q.consumer(ctx, st, wc.Consumer, wc.MaxDeliver, wc.Filters...)
	if err != nil {
		return err
	}
	// A fetch cut short by ctx hands back what it still brings in a
	// goroutine of its own, waited for with the others.
	var pending sync.WaitGroup
	defer pending.Wait()
	fetch := func(n int, each func(jetstream.Msg)) (int, error) {
		return stream(cons.Fetch(n, jetstream.FetchMaxWait(fetchWait)))(ctx, &pending, each)
	}
	if wc.Urgent != nil {
		urgent, err := q.consumer(ctx, st, wc.Urgent.Consumer, wc.MaxDeliver, wc.Urgent.Filters...)
		if err != nil {
			return err
		}
		fetch = func(n int, each func(jetstream.Msg)) (int, error) {
			got, err := stream(urgent.FetchNoWait(n))(ctx, &pending, each)
			if err != nil || got == n {
				return got, err
			}
			// A short wait on the batch lane: an urgent message arriving
			// meanwhile waits at most this long for a free slot.
			more, err := stream(cons.Fetch(n-got, jetstream.FetchMaxWait(200*time.Millisecond)))(ctx, &pending, each)
			return got + more, err
		}
	}
	// Handlers outlive ctx by up to DrainTimeout. Every goroutine started
	// here (handlers, the drain timer, fetches being handed back) has
	// ended when Work returns.
	var wg sync.WaitGroup
	defer wg.Wait()
	hctx, cancelHandlers := context.WithCancel(context.WithoutCancel(ctx))
	defer cancelHandlers()
	wg.Add(1)
	go func() {
		defer wg.Done()
		select {
		case <-ctx.Done():
		case <-hctx.Done():
			return
		}
		t := time.NewTimer(wc.DrainTimeout)
		defer t.Stop()
		select {
		case <-t.C:
			cancelHandlers()
		case <-hctx.Done():
		}
	}()

	sl := newSlots(wc.Concurrency, wc.MaxHeld)
	var handlers sync.WaitGroup
	for ctx.Err() == nil {
		// Fetch only as many as there are free slots: a buffered message's
		// AckWait would run while it waits.
		n := sl.take(wc.Concurrency)
		if n == 0 {
			select {
			case <-sl.wake:
			case <-ctx.Done():
			}
			continue
		}
		got, err := fetch(n, func(msg jetstream.Msg) {
			handlers.Add(1)
			go func() {
				defer handlers.Done()
				h := &handlerSlot{s: sl, running: true}
				defer h.done()
				q.handle(ctx, slot.With(hctx, h), msg, wc)
			}()
		})
		sl.untake(n - got)
		if err != nil && !errors.Is(err, jetstream.ErrNoMessages) && ctx.Err() == nil {
			wc.Logger.Warn("fetch failed; retrying", zap.String("consumer", wc.Consumer), zap.Error(err))
			sleepCtx(ctx, 500*time.Millisecond)
		}
	}
	handlers.Wait()
	return nil
}

func (q *Queue) handle(ctx, hctx context.Context, msg jetstream.Msg, wc WorkConfig) {
	d := Delivery{Msg: msg, Attempt: 1}
	if md, err := msg.Metadata(); err == nil {
		d.Attempt = int(md.NumDelivered)
	}
	d.Last = wc.MaxDeliver > 0 && d.Attempt >= wc.MaxDeliver
	if d.Attempt > 1 {
		wc.Logger.Info("redelivered message", zap.String("subject", msg.Subject()), zap.Int("attempt", d.Attempt))
	}
	observe := func(outcome string) {
		if wc.Observe != nil {
			wc.Observe(outcome, d.Attempt > 1)
		}
	}
	// Heartbeats keep a long LLM call from being redelivered elsewhere.
	stop, beating := make(chan struct{}), make(chan struct{})
	go func() {
		defer close(beating)
		t := time.NewTicker(q.cfg.AckWait / 3)
		defer t.Stop()
		for {
			select {
			case <-stop:
				return
			case <-t.C:
				_ = msg.InProgress()
			}
		}
	}()
	err := wc.Handler(hctx, d)
	for held := time.Now(); err != nil && wc.Transient != nil && wc.Transient(err) && hctx.Err() == nil && time.Since(held) < wc.HoldFor; {
		wc.Logger.Warn("a dependency is unavailable; holding the task until it returns", zap.String("subject", msg.Subject()), zap.Error(err))
		if wc.WaitReady != nil {
			_ = wc.WaitReady(hctx)
		} else {
			sleepCtx(hctx, time.Second)
		}
		err = wc.Handler(hctx, d)
	}
	close(stop)
	<-beating
	var p permanent
	switch {
	case err == nil:
		if aerr := msg.DoubleAck(context.WithoutCancel(hctx)); aerr != nil {
			wc.Logger.Warn("ack failed; the message may be redelivered", zap.String("subject", msg.Subject()), zap.Error(aerr))
		}
		observe("ack")
	case hctx.Err() != nil || (ctx.Err() != nil && errors.Is(err, context.Canceled)):
		// Shutting down: hand the work back at once for another worker.
		_ = msg.Nak()
		observe("handed_back")
	case errors.As(err, &p) || d.Last:
		wc.Logger.Error("giving up on a message", zap.String("subject", msg.Subject()), zap.Int("attempt", d.Attempt), zap.Error(err))
		if wc.OnGiveUp != nil {
			wc.OnGiveUp(context.WithoutCancel(hctx), d, err)
		}
		_ = msg.TermWithReason(truncateReason(err.Error()))
		observe("gave_up")
	default:
		delay := time.Duration(math.Min(float64(wc.RetryBase)*math.Pow(2, float64(d.Attempt-1)), float64(30*time.Second)))
		wc.Logger.Warn("task failed; redelivering", zap.String("subject", msg.Subject()), zap.Int("attempt", d.Attempt),
			zap.Duration("delay", delay), zap.Error(err))
		_ = msg.NakWithDelay(delay)
		observe("retry")
	}
}

// stream hands each message of a fetch to each as it arrives, instead of
// after the whole batch (or its wait) is over.
func stream(batch jetstream.MessageBatch, err error) func(ctx context.Context, pending *sync.WaitGroup, each func(jetstream.Msg)) (int, error) {
	return func(ctx context.Context, pending *sync.WaitGroup, each func(jetstream.Msg)) (int, error) {
		if err != nil {
			return 0, err
		}
		n := 0
		msgs := batch.Messages()
	loop:
		for {
			select {
			case msg, ok := <-msgs:
				if !ok {
					break loop
				}
				n++
				each(msg)
			case <-ctx.Done():
				// Stopping: hand back whatever the fetch still brings.
				pending.Add(1)
				go func() {
					defer pending.Done()
					for msg := range msgs {
						_ = msg.Nak()
					}
				}()
				return n, nil
			}
		}
		if err := batch.Error(); err != nil && !errors.Is(err, jetstream.ErrNoMessages) {
			return n, err
		}
		return n, nil
	}
}

func truncateReason(s string) string {
	if len(s) > 200 {
		return s[:200]
	}
	return s
}

func sleepCtx(ctx context.Context, d time.Duration) {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
	case <-t.C:
	}
}

// Exhausted is a message whose deliveries ran out without an outcome (its
// last holder died): Subject and Data are the message as published.
type Exhausted struct {
	Consumer string
	Subject  string
	Data     []byte
}

// WorkExhausted hands every message JetStream gave up redelivering to
// handle, then deletes it from the stream, until ctx ends. It reads the
// max-deliveries advisories kept in AdvisoryStream, so a task whose last
// delivery died with its worker is still accounted for. Messages already
// handled (terminated or acknowledged by their worker) are skipped.
func (q *Queue) WorkExhausted(ctx context.Context, wc WorkConfig, handle func(ctx context.Context, m Exhausted) error) error {
	wc.Consumer = "max-deliveries"
	wc.Filters = nil
	wc.MaxDeliver = -1
	wc.Handler = func(ctx context.Context, d Delivery) error {
		var adv struct {
			Consumer  string `json:"consumer"`
			StreamSeq uint64 `json:"stream_seq"`
		}
		if err := json.Unmarshal(d.Msg.Data(), &adv); err != nil || adv.StreamSeq == 0 {
			return Permanent(fmt.Errorf("malformed max-deliveries advisory %q", d.Msg.Data()))
		}
		m, err := q.stream.GetMsg(ctx, adv.StreamSeq)
		if errors.Is(err, jetstream.ErrMsgNotFound) {
			return nil // its worker terminated it after recording the outcome
		}
		if err != nil {
			return err
		}
		if err := handle(ctx, Exhausted{Consumer: adv.Consumer, Subject: m.Subject, Data: m.Data}); err != nil {
			return err
		}
		if err := q.stream.DeleteMsg(ctx, adv.StreamSeq); err != nil && !errors.Is(err, jetstream.ErrMsgNotFound) {
			return err
		}
		return nil
	}
	return q.work(ctx, q.advisories, wc)
}
