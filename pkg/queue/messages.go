package queue

import (
	"encoding/json"
	"fmt"
	"time"

	"github.com/quorumsql/quorum/pkg/cost"
)

// Version is the message schema version. A consumer refuses (terminates)
// messages of another major version rather than misreading them.
const Version = 1

// LinkTask asks a generator worker to link the tables of one example whose
// prompt is over budget, then publish its generation tasks.
type LinkTask struct {
	V       int    `json:"v"`
	Run     string `json:"run"`
	Example string `json:"example"`
	// InfoRef is the blob of the database's compressed information.
	InfoRef string `json:"info_ref"`
	Seed    uint64 `json:"seed"`
	Votes   int    `json:"votes"`
}

// GenerateTask asks for one candidate.
type GenerateTask struct {
	V       int    `json:"v"`
	Run     string `json:"run"`
	Example string `json:"example"`
	Round   int    `json:"round"`
	Index   int    `json:"index"`
	Seed    uint64 `json:"seed"`
	// InfoRef is the blob holding the example's table information
	// (dbinfo.Stored); ExplorationRef the exploration transcript (round 1).
	InfoRef        string `json:"info_ref"`
	ExplorationRef string `json:"exploration_ref,omitempty"`
	// Upstream is what produced this task (linking, exploration), to be
	// accounted with the candidate; UpstreamSeconds is how long that task
	// took.
	Upstream        cost.Ledger `json:"upstream,omitempty"`
	UpstreamSeconds float64     `json:"upstream_seconds,omitempty"`
}

// ExploreTask asks an explorer worker for one column exploration of a
// low-confidence example, followed by its regeneration task.
type ExploreTask struct {
	V       int    `json:"v"`
	Run     string `json:"run"`
	Example string `json:"example"`
	Index   int    `json:"index"`
	Votes   int    `json:"votes"`
	Seed    uint64 `json:"seed"`
	InfoRef string `json:"info_ref"`
}

// CandidateResult is exactly one per generation task: success, empty,
// error, gave up, or failed (the task exhausted its deliveries).
type CandidateResult struct {
	V       int    `json:"v"`
	Run     string `json:"run"`
	Example string `json:"example"`
	Round   int    `json:"round"`
	Index   int    `json:"index"`
	SQL     string `json:"sql"`
	Status  string `json:"status"`
	Error   string `json:"error,omitempty"`
	Rows    int    `json:"rows"`
	// CSVRef is the blob of the full result.
	CSVRef string      `json:"csv_ref,omitempty"`
	Cost   cost.Ledger `json:"cost"`
	Worker string      `json:"worker"`
	// ElapsedSeconds is the wall time of the task (and of the exploration
	// task before it); ChainSeconds the part spent in LLM calls and
	// warehouse queries.
	ElapsedSeconds float64 `json:"elapsed_seconds"`
	ChainSeconds   float64 `json:"chain_seconds"`
	// Started is when the task began on its worker.
	Started time.Time `json:"started,omitzero"`
}

// FinalAnswer is the voter's decision for one example.
type FinalAnswer struct {
	V          int    `json:"v"`
	Run        string `json:"run"`
	Example    string `json:"example"`
	Status     string `json:"status"` // answered, no_answer, failed
	Confidence string `json:"confidence"`
	Method     string `json:"method"`
	Rounds     int    `json:"rounds"`
	SQL        string `json:"sql,omitempty"`
	CSVRef     string `json:"csv_ref,omitempty"`
	Candidates int    `json:"candidates"`
	Valid      int    `json:"valid"`
	// CandidateRefs are every valid candidate's result blob, for EX@k.
	CandidateRefs []string    `json:"candidate_refs,omitempty"`
	Cost          cost.Ledger `json:"cost"`
	Error         string      `json:"error,omitempty"`
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

// Decode reads a message body into v and checks its version.
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
	return nil
}
