package serve

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"time"

	"github.com/quorumsql/quorum/pkg/runtime/runstate"
)

// eventPoll is how often a stream looks at the question's run state. The
// state is in Redis, so any serve process can stream any question.
const eventPoll = 250 * time.Millisecond

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
	fl, ok := w.(http.Flusher)
	if !ok {
		writeJSON(w, http.StatusInternalServerError, apiError{Error: "streaming is not supported by this connection"})
		return
	}
	w.Header().Set("Content-Type", "text/event-stream")
	w.Header().Set("Cache-Control", "no-cache")
	w.Header().Set("X-Accel-Buffering", "no")
	w.WriteHeader(http.StatusOK)
	n := 0
	last := time.Now()
	send := func(event string, v any) {
		b, _ := json.Marshal(v)
		n++
		fmt.Fprintf(w, "id: %d\nevent: %s\ndata: %s\n\n", n, event, b)
		fl.Flush()
		last = time.Now()
	}
	ctx := r.Context()
	w1 := &watch{s: s, id: q.ID, seen: map[string]bool{}}
	t := time.NewTicker(eventPoll)
	defer t.Stop()
	for {
		rec, err := s.store.get(ctx, q.ID)
		if err != nil {
			if ctx.Err() == nil {
				send("error", apiError{Error: err.Error()})
			}
			return
		}
		w1.progress(ctx, &rec.Question, send)
		if rec.Terminal() {
			event := map[string]string{Answered: "answer", Failed: "failed", Cancelled: "cancelled"}[rec.Status]
			send(event, &rec.Question)
			return
		}
		if time.Since(last) > keepAlive {
			// A comment line: proxies with idle timeouts keep the stream.
			fmt.Fprint(w, ": keepalive\n\n")
			fl.Flush()
			last = time.Now()
		}
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

// keepAlive is the longest a stream stays silent.
const keepAlive = 15 * time.Second

// watch remembers what a stream has sent.
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
