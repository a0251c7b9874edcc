package serve

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"sync"
	"time"

	"github.com/quorumsql/quorum/internal/runtime/runstate"
)

// A question's run state is in Redis, so any serve process can stream any
// question. One poller per question and process (a feed) reads it, however
// many streams watch the question; it looks every eventPoll while things
// change and backs off to eventPollIdle while nothing does. Before, every
// stream polled on its own every 250 ms: 100 idle streams kept serve at
// half a core, mostly Redis round trips and JSON decoding.
const (
	eventPoll     = 250 * time.Millisecond
	eventPollIdle = 2 * time.Second
)

// keepAlive is the longest a stream stays silent.
const keepAlive = 15 * time.Second

// questionEvents streams a question's progress as server-sent events:
// status changes, each task as it is published and as it finishes, each
// candidate as it is executed, each vote, and last the answer (the
// question as GET returns it) as an "answer", "failed" or "cancelled"
// event.
func (s *Server) questionEvents(w http.ResponseWriter, r *http.Request) {
	q, ok := s.owned(w, r)
	if !ok {
		return
	}
	which, release := s.streams.open(tenantOf(r), s.cfg.HTTP)
	if release == nil {
		if s.cfg.Metrics != nil {
			s.cfg.Metrics.StreamsRefused.WithLabelValues(which).Inc()
		}
		refuseStream(w, which, s.cfg.HTTP)
		return
	}
	defer release()
	if s.cfg.Metrics != nil {
		s.cfg.Metrics.EventStreams.Inc()
		defer s.cfg.Metrics.EventStreams.Dec()
	}
	rc := http.NewResponseController(w)
	// Each write has its own deadline (the server's WriteTimeout would end
	// the stream): a client that stopped reading is dropped once its
	// buffers fill, not held forever.
	write := func(b []byte) bool {
		_ = rc.SetWriteDeadline(time.Now().Add(s.cfg.HTTP.StreamWriteTimeout))
		if _, err := w.Write(b); err != nil {
			return false
		}
		return rc.Flush() == nil
	}
	w.Header().Set("Content-Type", "text/event-stream")
	w.Header().Set("Cache-Control", "no-cache")
	w.Header().Set("X-Accel-Buffering", "no")
	w.WriteHeader(http.StatusOK)
	if !write(nil) {
		return
	}
	f := s.feeds.join(s, q)
	defer s.feeds.leave(f)
	ctx := r.Context()
	closing := closingStreams(ctx)
	idle := time.NewTimer(keepAlive)
	defer idle.Stop()
	for next := 0; ; {
		evs, changed, done := f.since(next)
		if len(evs) > 0 {
			var b []byte
			for i, e := range evs {
				b = fmt.Appendf(b, "id: %d\nevent: %s\ndata: %s\n\n", next+i+1, e.name, e.data)
			}
			if !write(b) {
				return
			}
			next += len(evs)
			idle.Reset(keepAlive)
		}
		if done {
			return
		}
		select {
		case <-ctx.Done():
			return
		case <-closing:
			return // the listener is shutting down
		case <-changed:
		case <-idle.C:
			// A comment line: proxies with idle timeouts keep the stream.
			if !write([]byte(": keepalive\n\n")) {
				return
			}
			idle.Reset(keepAlive)
		}
	}
}

// event is one server-sent event.
type event struct {
	name string
	data []byte
}

// feeds are this process's question feeds, by question id; a feed lives
// while a stream watches it.
type feeds struct {
	mu   sync.Mutex
	byID map[string]*feed
}

// feed is one question's events so far, appended by its poller.
type feed struct {
	id     string
	users  int
	cancel context.CancelFunc

	mu      sync.Mutex
	events  []event
	done    bool
	changed chan struct{} // closed (and replaced) on every append
}

// join returns q's feed, starting its poller if no stream watches it yet.
func (fs *feeds) join(s *Server, q *Question) *feed {
	fs.mu.Lock()
	defer fs.mu.Unlock()
	if f, ok := fs.byID[q.ID]; ok {
		f.users++
		return f
	}
	ctx, cancel := context.WithCancel(s.baseCtx())
	f := &feed{id: q.ID, users: 1, cancel: cancel, changed: make(chan struct{})}
	if fs.byID == nil {
		fs.byID = map[string]*feed{}
	}
	fs.byID[q.ID] = f
	s.pollers.Add(1)
	go func() {
		defer s.pollers.Done()
		f.poll(ctx, s, q.ID)
	}()
	return f
}

// leave drops a stream from its feed; the last one stops the poller and
// forgets the feed.
func (fs *feeds) leave(f *feed) {
	fs.mu.Lock()
	defer fs.mu.Unlock()
	if f.users--; f.users == 0 {
		f.cancel()
		delete(fs.byID, f.id)
	}
}

// since returns the events after the first n, a channel closed when more
// arrive, and whether the feed has ended.
func (f *feed) since(n int) ([]event, <-chan struct{}, bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.events[n:len(f.events):len(f.events)], f.changed, f.done
}

func (f *feed) send(name string, v any) {
	b, _ := json.Marshal(v)
	f.mu.Lock()
	defer f.mu.Unlock()
	f.events = append(f.events, event{name: name, data: b})
	close(f.changed)
	f.changed = make(chan struct{})
}

func (f *feed) end() {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.done = true
	close(f.changed)
	f.changed = make(chan struct{})
}

// poll reads the question's run state until it ends (or the last stream
// leaves) and appends what changed.
func (f *feed) poll(ctx context.Context, s *Server, id string) {
	defer f.end()
	w := &watch{s: s, id: id, seen: map[string]bool{}}
	wait := eventPoll
	t := time.NewTimer(0)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		rec, err := s.store.get(ctx, id)
		if err != nil {
			if ctx.Err() == nil {
				f.send("error", apiError{Error: err.Error()})
			}
			return
		}
		before := len(w.seen)
		w.progress(ctx, &rec.Question, f.send)
		if rec.Terminal() {
			event := map[string]string{Answered: "answer", Failed: "failed", Cancelled: "cancelled"}[rec.Status]
			f.send(event, &rec.Question)
			return
		}
		if len(w.seen) > before {
			wait = eventPoll
		} else {
			wait = min(2*wait, eventPollIdle)
		}
		t.Reset(wait)
	}
}

// watch remembers what a feed has sent.
type watch struct {
	s      *Server
	id     string
	status string
	seen   map[string]bool
}

// progress sends what changed in the question's run since the last look.
func (w *watch) progress(ctx context.Context, q *Question, send func(string, any)) {
	if q.Status != w.status {
		w.status = q.Status
		w.seen["status:"+q.Status] = true
		send("status", map[string]string{"status": q.Status})
	}
	st := w.s.cfg.Env.State
	run, ex, ag := q.ID, q.Example, q.Agent
	tasks, err := st.Tasks(ctx, run, ex, ag)
	if err != nil {
		return
	}
	for _, t := range tasks {
		if k := "task:" + t.Task.ID; !w.seen[k] {
			w.seen[k] = true
			send("task", map[string]any{"id": t.Task.ID, "kind": t.Task.Kind, "round": t.Task.Round})
		}
		if k := "done:" + t.Task.ID; !w.seen[k] {
			if done, _ := st.Done(ctx, run, ex, ag, t.Task.ID); done {
				w.seen[k] = true
				send("task_done", map[string]any{"id": t.Task.ID, "kind": t.Task.Kind})
			}
		}
	}
	current, err := st.Current(ctx, run, ex, ag)
	if err != nil {
		return
	}
	for round := 0; round <= current; round++ {
		results, err := st.Results(ctx, run, ex, ag, round)
		if err != nil {
			return
		}
		for _, c := range results {
			if k := fmt.Sprintf("cand:%d:%d", c.Round, c.Index); !w.seen[k] {
				w.seen[k] = true
				send("candidate", map[string]any{"round": c.Round, "index": c.Index, "status": c.Status, "rows": c.Rows, "sql": c.SQL, "error": c.Error})
			}
		}
		if k := fmt.Sprintf("vote:%d", round); !w.seen[k] {
			if outcome, _ := st.Decided(ctx, runstate.Round{Run: run, Example: ex, Agent: ag, Round: round}); outcome != "" {
				w.seen[k] = true
				send("vote", map[string]any{"round": round, "outcome": outcome})
			}
		}
	}
}
