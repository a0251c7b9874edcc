package voter

import (
	"context"
	"strconv"
	"strings"
	"time"

	"go.uber.org/zap"

	"github.com/quorumsql/quorum/internal/queue"
	"github.com/quorumsql/quorum/internal/runtime/message"
	"github.com/quorumsql/quorum/internal/runtime/runenv"
	"github.com/quorumsql/quorum/internal/runtime/runstate"
)

// Reconciling Redis with JetStream.
//
// Redis may lose its last writes (restarted from an older snapshot or a
// lagging append-only file, a replica promoted) while JetStream keeps
// everything: then a task acknowledged since looks unfinished in Redis but
// is in no stream, a result the voter recorded since is missing, a decision
// is undone. Nothing would ever come for those rounds.
//
// How "queued" is told from "lost": a work-queue stream deletes a message
// only when it is acknowledged (or terminated), and a worker acknowledges a
// task only after its results are published and it is marked done, the
// voter a result only after recording it. So a task or result JetStream
// still holds (queued, running, awaiting redelivery, out of deliveries and
// not yet accounted for) will still happen; one it does not hold, whose
// effect Redis does not have either, is lost. The stream is read (Held, by
// subject) before Redis, so that anything deleted before the read has its
// effect in Redis by the time Redis is read. A task logged but not yet
// published (a publisher between the two steps) also looks lost: it is
// reissued only when seen lost on two passes at least a pass apart.
// Checking a recorded stream sequence per task (GetMsg) would cost a write
// per publish and would itself be lost with Redis; the subject read needs
// nothing stored.
//
// A lost task is reissued: its done and taken marks are cleared and it is
// published again with a new message id (message.Task.Reissue), which its
// results and continuations carry, so JetStream's deduplication (two hours
// of ids, the lost ones among them) lets them through. A lost result is
// asked again the same way, from every task owing its slot (a finished
// one's continuations are skipped as done, unless reissued too). Results
// are recorded once per (round, index), so a reissue never counts twice.

// held is what the stream holds of one run: its tasks by example, agent
// and task id (whatever their generation or reissue), its results by
// example, agent, round and index.
type held struct {
	tasks, results map[string]bool
}

func taskKey(ex, agentName, id string) string { return ex + "|" + agentName + "|" + id }

func slotKey(ex, agentName string, round, index int) string {
	return ex + "|" + agentName + "|" + strconv.Itoa(round) + "|" + strconv.Itoa(index)
}

// held reads what the stream holds of run.
func (v *Voter) held(ctx context.Context, run string) (*held, error) {
	h := &held{tasks: map[string]bool{}, results: map[string]bool{}}
	err := v.env.Queue.Held(ctx, queue.RunSubjects(run), func(subject string, data []byte) {
		p := strings.Split(subject, ".")
		if len(p) < 3 {
			return
		}
		switch p[2] {
		case queue.StageFinal:
		case queue.StageResult:
			var r message.CandidateResult
			if queue.Decode(data, &r) == nil {
				h.results[slotKey(r.Example, r.Agent, r.Round, r.Index)] = true
			}
		default:
			var t message.Task
			if queue.Decode(data, &t) == nil {
				h.tasks[taskKey(t.Example, t.Agent, t.Task.ID)] = true
			}
		}
	})
	return h, err
}

// roundState is what a round is waiting for, from Redis and the stream.
type roundState struct {
	r       runstate.Round
	decided string
	// complete: every expected result is recorded (its decision was lost,
	// or is being made).
	complete bool
	// pending: a task or result the round misses is in the stream.
	pending bool
	// lost are the tasks to reissue: unfinished ones the stream does not
	// hold, and finished ones whose result is neither recorded nor held.
	lost []*message.Task
}

// examine reads a round from Redis, after h was read from the stream.
func (v *Voter) examine(ctx context.Context, r runstate.Round, h *held) (*roundState, error) {
	st := &roundState{r: r}
	s := v.env.State
	decided, err := s.Decided(ctx, r)
	if err != nil || decided != "" {
		st.decided = decided
		return st, err
	}
	expect, err := s.Expected(ctx, r.Run, r.Example, r.Agent, r.Round)
	if err != nil {
		return nil, err
	}
	results, err := s.Results(ctx, r.Run, r.Example, r.Agent, r.Round)
	if err != nil {
		return nil, err
	}
	have := map[int]bool{}
	for _, res := range results {
		have[res.Index] = true
	}
	if expect > 0 && len(have) >= expect {
		st.complete = true
		return st, nil
	}
	tasks, err := s.Tasks(ctx, r.Run, r.Example, r.Agent)
	if err != nil {
		return nil, err
	}
	done, err := s.DoneSet(ctx, r.Run, r.Example, r.Agent)
	if err != nil {
		return nil, err
	}
	reissued, err := s.Reissues(ctx, r.Run, r.Example, r.Agent)
	if err != nil {
		return nil, err
	}
	missing := func(slot int) bool {
		if have[slot] {
			return false
		}
		if h.results[slotKey(r.Example, r.Agent, r.Round, slot)] {
			st.pending = true // on its way to the voter
			return false
		}
		return true
	}
	// owners are the round's tasks owing each missing slot; open counts
	// the unfinished ones.
	owners, open := map[int][]*message.Task{}, map[int]int{}
	for _, t := range tasks {
		if t.Task.Round != r.Round {
			continue
		}
		_, finished := done[t.Task.ID]
		needed := false
		for _, slot := range t.Task.Slots {
			if missing(slot) {
				needed = true
				owners[slot] = append(owners[slot], t)
				if !finished {
					open[slot]++
				}
			}
		}
		if finished || !needed {
			continue
		}
		switch {
		case h.tasks[taskKey(r.Example, r.Agent, t.Task.ID)]:
			st.pending = true
		case reissued[t.Task.ID] < Reissues:
			st.lost = append(st.lost, t)
		}
	}
	// A missing slot whose every owner finished: its result was lost.
	seen := map[string]bool{}
	for _, t := range st.lost {
		seen[t.Task.ID] = true
	}
	for slot, ts := range owners {
		if open[slot] > 0 {
			continue
		}
		for _, t := range ts {
			if !seen[t.Task.ID] && reissued[t.Task.ID] < Reissues {
				seen[t.Task.ID] = true
				st.lost = append(st.lost, t)
			}
		}
	}
	return st, nil
}

// Reissues bounds how often one task is reissued (runenv.Reissues).
const Reissues = runenv.Reissues

// reconciler remembers the tasks seen lost, so that one is reissued only
// when found lost still at least a pass later. It is the sweeper's: one
// goroutine uses it.
type reconciler struct {
	v *Voter
	// every is how often open rounds are reconciled, how long a round
	// must have made no progress to be, and how long a task must be seen
	// lost before it is reissued.
	every time.Duration
	last  time.Time
	lost  map[string]*sighting
}

// sighting is when a task was first and last seen lost.
type sighting struct{ first, last time.Time }

// pass reconciles every open round that made no progress for a pass.
func (rc *reconciler) pass(ctx context.Context, now time.Time) {
	v := rc.v
	rc.last = now
	rounds, err := v.env.State.AllOpenRounds(ctx)
	if err != nil {
		return
	}
	byRun := map[string][]runstate.Round{}
	var order []string
	for _, rd := range rounds {
		run, err := v.env.Run(ctx, rd.Run)
		if err != nil {
			continue // a run without a manifest: nothing to publish with
		}
		if rd.Deadline.Add(-run.Manifest.RoundTimeout).After(now.Add(-rc.every)) {
			continue // progress within the last pass
		}
		if byRun[rd.Run] == nil {
			order = append(order, rd.Run)
		}
		byRun[rd.Run] = append(byRun[rd.Run], rd.Round)
	}
	for _, run := range order {
		h, err := v.held(ctx, run)
		if err != nil {
			v.env.Log.Debug("reconcile: reading the stream failed", zap.String("run", run), zap.Error(err))
			continue
		}
		for _, r := range byRun[run] {
			if ctx.Err() != nil {
				return
			}
			st, err := v.examine(ctx, r, h)
			if err != nil {
				continue
			}
			if err := rc.settle(ctx, st, now); err != nil && ctx.Err() == nil {
				v.env.Log.Warn("reconciling a round failed", zap.String("run", r.Run), zap.String("example", r.Example), zap.Error(err))
			}
		}
	}
	// Tasks no longer seen lost (found, finished, their round decided).
	for k, s := range rc.lost {
		if now.Sub(s.last) > 3*rc.every {
			delete(rc.lost, k)
		}
	}
}

// settle acts on a round's state: a decided round leaves the open ones, a
// complete one is decided, lost tasks seen lost before are reissued.
func (rc *reconciler) settle(ctx context.Context, st *roundState, now time.Time) error {
	v := rc.v
	switch {
	case st.decided != "":
		return v.env.State.CloseRound(ctx, st.r)
	case st.complete:
		v.env.Log.Warn("reconcile: a round has every result and no decision: deciding it", zap.String("run", st.r.Run),
			zap.String("example", st.r.Example), zap.Int("round", st.r.Round))
		return v.Decide(ctx, st.r)
	}
	var due []*message.Task
	for _, t := range st.lost {
		k := st.r.Run + "|" + taskKey(t.Example, t.Agent, t.Task.ID)
		s, ok := rc.lost[k]
		if !ok {
			rc.lost[k] = &sighting{first: now, last: now}
			continue
		}
		s.last = now
		if now.Sub(s.first) >= rc.every {
			due = append(due, t)
			delete(rc.lost, k)
		}
	}
	return v.reissue(ctx, st.r, due)
}

// reissue publishes lost tasks of a round again under new message ids,
// queued and unfinished.
func (v *Voter) reissue(ctx context.Context, r runstate.Round, tasks []*message.Task) error {
	if len(tasks) == 0 {
		return nil
	}
	ids := make([]string, len(tasks))
	for i, t := range tasks {
		ids[i] = t.Task.ID
	}
	v.env.Log.Warn("reconcile: tasks neither finished nor in the stream (Redis lost their state): publishing them again",
		zap.String("run", r.Run), zap.String("example", r.Example), zap.Int("round", r.Round), zap.Strings("tasks", ids))
	return v.env.Reissue(ctx, "voter", r, tasks, time.Now().UnixMilli())
}
