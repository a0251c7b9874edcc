// Package message holds the runtime's messages on the queue: the task
// envelope around an agent's task, the candidate result a task records for
// the voter, and the final answer the voter sends the coordinator. The
// envelope is the runtime's (run, example, agent, seed, the cost carried so
// far); the task inside it is the agent's.
package message

import (
	"strconv"
	"time"

	"github.com/quorumsql/quorum/internal/queue"
	"github.com/quorumsql/quorum/pkg/cost"
	"github.com/quorumsql/quorum/pkg/runtime/agent"
)

// Version is the schema version every message carries.
const Version = queue.Version

// Task is the envelope of one agent task.
type Task struct {
	V       int    `json:"v"`
	Run     string `json:"run"`
	Example string `json:"example"`
	Agent   string `json:"agent"`
	// Warehouse is the example's warehouse (the subject's last token).
	Warehouse string     `json:"warehouse"`
	Task      agent.Task `json:"task"`
	Seed      uint64     `json:"seed"`
	// Upstream is the cost of the tasks this one continues, accounted with
	// its first result; UpstreamSeconds their wall time.
	Upstream        cost.Ledger `json:"upstream,omitempty"`
	UpstreamSeconds float64     `json:"upstream_seconds,omitempty"`
	// UpstreamChain is the LLM and warehouse time of the chain of tasks
	// this one continues (the slowest part's, after a join): the chain
	// with unlimited workers, pexa C.1's parallel latency.
	UpstreamChain float64 `json:"upstream_chain,omitempty"`
	// Generation counts the times the task was published again after its
	// deliveries ran out with no worker left to give it up (killed
	// holding the last one).
	Generation int `json:"generation,omitempty"`
	// Reissue, when set, marks a task published again because Redis lost
	// what it had recorded of it (restored from an older snapshot, a
	// lagging replica promoted) while JetStream no longer holds it: its
	// message id, its results' and its continuations' carry it, so
	// JetStream's deduplication, which still remembers the lost messages'
	// ids, lets them through. Its value is unique per reissue (the
	// voter's clock, in ms).
	Reissue int64 `json:"reissue,omitempty"`
	// Parent is the envelope of the task whose outcome published this one
	// (nil for a round's first tasks and a join's continuation): when the
	// inputs it left in the blob store are gone, it is run again
	// (agent.ErrBlobLost). It keeps its own parents up to MaxAncestors.
	Parent *Task `json:"parent,omitempty"`
}

// MaxAncestors bounds the parents a task carries: a producer further up
// is not run again, and its continuation fails as before.
const MaxAncestors = 4

// AsParent is t as its continuations carry it, its ancestors beyond
// MaxAncestors-1 left out.
func (t *Task) AsParent() *Task {
	head := *t
	for p, depth := &head, 1; p.Parent != nil; depth++ {
		if depth >= MaxAncestors {
			p.Parent = nil
			break
		}
		cp := *p.Parent
		p.Parent = &cp
		p = &cp
	}
	return &head
}

// ID is the task's message id: the same task published twice is one task;
// a new generation or a reissue is a new message.
func (t *Task) ID() string {
	id := t.Run + "." + t.Example + "." + t.Agent + "." + t.Task.ID
	if t.Generation > 0 {
		id += ".g" + strconv.Itoa(t.Generation)
	}
	return id + ReissueSuffix(t.Reissue)
}

// ReissueSuffix is what a reissued task's messages add to their ids ("" for
// none).
func ReissueSuffix(reissue int64) string {
	if reissue == 0 {
		return ""
	}
	return ".r" + strconv.FormatInt(reissue, 10)
}

// CandidateResult is one candidate of a round: success, empty, error, gave
// up, or failed (its task exhausted its deliveries).
type CandidateResult struct {
	V       int    `json:"v"`
	Run     string `json:"run"`
	Example string `json:"example"`
	Agent   string `json:"agent"`
	Round   int    `json:"round"`
	Index   int    `json:"index"`
	SQL     string `json:"sql"`
	Status  string `json:"status"`
	Error   string `json:"error,omitempty"`
	Rows    int    `json:"rows"`
	// CSVRef is the blob of the full result.
	CSVRef  string      `json:"csv_ref,omitempty"`
	Payload []byte      `json:"payload,omitempty"`
	Cost    cost.Ledger `json:"cost"`
	Worker  string      `json:"worker"`
	// ElapsedSeconds is the wall time of the task (and of the tasks it
	// continues); ChainSeconds the part spent in LLM calls and warehouse
	// queries.
	ElapsedSeconds float64 `json:"elapsed_seconds"`
	ChainSeconds   float64 `json:"chain_seconds"`
	// Started is when the task began on its worker.
	Started time.Time `json:"started,omitzero"`
	// Reissue is the producing task's (Task.Reissue): part of the
	// result's message id.
	Reissue int64 `json:"reissue,omitempty"`
}

// MemberAnswer is one member agent's decision in a composite answer.
type MemberAnswer struct {
	Agent      string `json:"agent"`
	Status     string `json:"status"` // answered or no_answer
	SQL        string `json:"sql,omitempty"`
	CSVRef     string `json:"csv_ref,omitempty"`
	Confidence string `json:"confidence,omitempty"`
	Method     string `json:"method,omitempty"`
	Valid      int    `json:"valid"`
	Agrees     bool   `json:"agrees"`
	// StoppedAfter and Posterior are the member's adaptive-sampling
	// verdict (agent.Member.Sampling).
	StoppedAfter int     `json:"stopped_after,omitempty"`
	Posterior    float64 `json:"posterior,omitempty"`
}

// CandidateSQL is one candidate of a decision: its SQL, its status
// (agent.StatusOK and the others) and, when it produced rows, the blob of
// its result.
type CandidateSQL struct {
	Round  int    `json:"round"`
	Index  int    `json:"index"`
	Status string `json:"status"`
	SQL    string `json:"sql"`
	CSVRef string `json:"csv_ref,omitempty"`
}

// Part is one recorded part of a join: the task's value or why it was
// lost, with what it cost (the continuation carries the parts' costs).
type Part struct {
	Value          []byte      `json:"value,omitempty"`
	Lost           string      `json:"lost,omitempty"`
	Cost           cost.Ledger `json:"cost,omitempty"`
	ElapsedSeconds float64     `json:"elapsed_seconds,omitempty"`
	ChainSeconds   float64     `json:"chain_seconds,omitempty"`
}

// FinalAnswer is the voter's decision for one example.
type FinalAnswer struct {
	V          int    `json:"v"`
	Run        string `json:"run"`
	Example    string `json:"example"`
	Agent      string `json:"agent,omitempty"`
	Status     string `json:"status"` // answered, no_answer, failed
	Confidence string `json:"confidence"`
	Method     string `json:"method"`
	Rounds     int    `json:"rounds"`
	SQL        string `json:"sql,omitempty"`
	CSVRef     string `json:"csv_ref,omitempty"`
	Candidates int    `json:"candidates"`
	Valid      int    `json:"valid"`
	// Agreed lists the candidates (by index) whose answers agree with the
	// final one.
	Agreed []int `json:"agreed,omitempty"`
	// CandidateRefs are every valid candidate's result blob, for EX@k.
	CandidateRefs []string `json:"candidate_refs,omitempty"`
	// CandidateSQL are every candidate that wrote SQL, whatever its status,
	// so the outputs keep the whole pool for Best-of-N scoring.
	CandidateSQL []CandidateSQL `json:"candidate_sql,omitempty"`
	// Members are a composite agent's member decisions, and Rule how they
	// were combined.
	Members []MemberAnswer `json:"members,omitempty"`
	Rule    string         `json:"rule,omitempty"`
	// StoppedAfter and Posterior are adaptive sampling's verdict
	// (agent.Sampling).
	StoppedAfter int         `json:"stopped_after,omitempty"`
	Posterior    float64     `json:"posterior,omitempty"`
	Cost         cost.Ledger `json:"cost"`
	Error        string      `json:"error,omitempty"`
	// CriticalPathSeconds is the slowest candidate chain of each round,
	// added up: what the example would take with unlimited workers.
	CriticalPathSeconds float64 `json:"critical_path_seconds"`
	// TaskSeconds is the summed wall time of the example's tasks, Tasks
	// their number.
	TaskSeconds float64 `json:"task_seconds"`
	Tasks       int     `json:"tasks"`
	// ServiceSeconds runs from the example's first task starting to this
	// decision: its latency without the time it queued before any worker
	// took it (later waits for the quota still count). It is what
	// "candidates run in parallel" is judged by.
	ServiceSeconds float64 `json:"service_seconds,omitempty"`
}
