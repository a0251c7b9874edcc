package runstate

import (
	"context"
	"encoding/json"
	"fmt"
	"sort"
	"strconv"
	"time"

	"github.com/quorumsql/quorum/internal/rdb"
	"github.com/quorumsql/quorum/internal/runtime/message"
)

// Session is one stretch of a run that a coordinator drove: from its start
// to its interruption, crash or end. A resume begins another, so a run's
// report can add up its sessions instead of knowing only the last.
type Session struct {
	// N numbers the run's sessions from 1.
	N     int       `json:"-"`
	Start time.Time `json:"start"`
	// End is when the session closed (Closed), else its last heartbeat:
	// a killed coordinator records no end.
	End    time.Time `json:"end"`
	Closed bool      `json:"closed,omitempty"`
}

// BeginSession numbers a new session of run and records it, started at
// start, and returns its number.
func (s *Store) BeginSession(ctx context.Context, run string, start time.Time) (int, error) {
	n, err := rdb.HIncrRunKey(ctx, s.rdb, run, rdb.SessionsKey(run), rdb.SessionCountField, 1)
	if err != nil {
		return 0, fmt.Errorf("begin a session of run %s: %w", run, err)
	}
	sess := Session{N: int(n), Start: start, End: start}
	if err := s.SetSession(ctx, run, sess); err != nil {
		return 0, err
	}
	return sess.N, nil
}

// SetSession records session sess.N of run as sess (a heartbeat, or its
// close).
func (s *Store) SetSession(ctx context.Context, run string, sess Session) error {
	b, _ := json.Marshal(sess)
	if err := rdb.HSetRunKey(ctx, s.rdb, run, rdb.SessionsKey(run), rdb.StateKey, strconv.Itoa(sess.N), b); err != nil {
		return fmt.Errorf("record session %d of run %s: %w", sess.N, run, err)
	}
	return nil
}

// Sessions returns run's recorded sessions by number (none for a run
// recorded before sessions were kept).
func (s *Store) Sessions(ctx context.Context, run string) ([]Session, error) {
	m, err := s.rdb.HGetAll(ctx, rdb.SessionsKey(run)).Result()
	if err != nil {
		return nil, fmt.Errorf("sessions of run %s: %w", run, err)
	}
	out := make([]Session, 0, len(m))
	for k, v := range m {
		if k == rdb.SessionCountField {
			continue
		}
		n, err := strconv.Atoi(k)
		if err != nil {
			return nil, fmt.Errorf("sessions of run %s: field %q: %w", run, k, err)
		}
		sess := Session{N: n}
		if err := json.Unmarshal([]byte(v), &sess); err != nil {
			return nil, fmt.Errorf("session %d of run %s: %w", n, run, err)
		}
		out = append(out, sess)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].N < out[j].N })
	return out, nil
}

// Recorded is a final answer as the run keeps it: with when the
// coordinator recorded it and in which session, so a later session reports
// the example's latency from them rather than from its own clock. The
// fields sit beside the answer's in one JSON object, so a reader of the
// answer alone (Finals) is unchanged.
type Recorded struct {
	*message.FinalAnswer
	// At and Session are zero for a final recorded before they were kept.
	At      time.Time `json:"recorded_at,omitzero"`
	Session int       `json:"session,omitempty"`
}

// RecordFinal records an example's final answer with when (at) and in
// which session of its run it was recorded, in the one write SetFinal
// makes: an answer is never kept without its time.
func (s *Store) RecordFinal(ctx context.Context, f *message.FinalAnswer, at time.Time, session int) error {
	b, err := json.Marshal(Recorded{FinalAnswer: f, At: at, Session: session})
	if err != nil {
		return fmt.Errorf("final answer of %s in run %s: %w", f.Example, f.Run, err)
	}
	if err := rdb.HSetRunKey(ctx, s.rdb, f.Run, rdb.FinalKey(f.Run), rdb.AnswerKey, f.Example, b); err != nil {
		return fmt.Errorf("record the final answer of %s in run %s: %w", f.Example, f.Run, err)
	}
	return nil
}

// RecordedFinals returns every final answer of a run with when it was
// recorded, by example.
func (s *Store) RecordedFinals(ctx context.Context, run string) (map[string]*Recorded, error) {
	m, err := s.rdb.HGetAll(ctx, rdb.FinalKey(run)).Result()
	if err != nil {
		return nil, fmt.Errorf("final answers of run %s: %w", run, err)
	}
	out := make(map[string]*Recorded, len(m))
	for k, v := range m {
		r := &Recorded{FinalAnswer: &message.FinalAnswer{}}
		if err := json.Unmarshal([]byte(v), r); err != nil {
			return nil, fmt.Errorf("final answer of %s in run %s: %w", k, run, err)
		}
		out[k] = r
	}
	return out, nil
}
