// Package agent is the seam between quorum's runtime and the Text-to-SQL
// agents it runs. An agent registers its task kinds, each with the worker
// pool it runs on, its payload type and the handler that executes one
// task, and decides an example from what its tasks recorded. The runtime owns everything around that: delivery over
// JetStream, idempotency, redelivery and give-up, resume, round deadlines,
// the shared quotas and the cost ledger. No agent code does any of those.
//
// The shape follows River's typed job kinds (AddWorker[T]): a task kind is
// registered once, with its pool, its payload type and its handler
// (Register), and the runtime decodes each task's payload and dispatches
// it to the handler (Definition.Execute).
package agent

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"github.com/quorumsql/quorum/pkg/warehouse/localdb"
	"hash/fnv"
	"maps"
	"slices"
	"sort"
	"strconv"
	"strings"

	"go.uber.org/zap"

	"github.com/quorumsql/quorum/pkg/cost"
	"github.com/quorumsql/quorum/pkg/dataset"
	"github.com/quorumsql/quorum/pkg/llm"
	"github.com/quorumsql/quorum/pkg/warehouse"
)

// Pool is a worker pool. Pools scale separately: generator workers by the
// LLM quota, explorer workers by the warehouse quota.
type Pool string

// The pools; their names are the NATS subject tokens and consumer prefixes.
const (
	Generator Pool = "generate" // LLM-bound tasks
	Explorer  Pool = "explore"  // warehouse-heavy tasks
)

// Option declares one agent option, set with --agent-option NAME=VALUE and
// recorded in the run's manifest.
type Option struct {
	Name, Default, Usage string
	// Asker, when set, lets the one asking a question (quorum serve's
	// options field) set the option within its bounds; an option without
	// it is the operator's alone, since a tenant's value spends the
	// operator's quotas.
	Asker *AskerBound
}

// MaxAskedCandidates bounds what a question may ask of any option counting
// candidates (votes, passes, rounds, waves): each candidate costs several
// LLM calls of the operator's quota.
const MaxAskedCandidates = 32

// AskerBound is what a question may set an option to: a boolean, an
// integer in [Min, Max], a number in [Min, Max], or one of Choices.
type AskerBound struct {
	Kind     AskerKind
	Min, Max float64
	Choices  []string
}

// AskerKind is the type of value an asker may give an option.
type AskerKind int

// The kinds of asker-settable option.
const (
	AskBool AskerKind = iota + 1
	AskInt
	AskFloat
	AskChoice
)

// AskBoolean, AskCount, AskNumber and AskOneOf are the bounds agents
// declare: a flag, a count of candidates (1 to MaxAskedCandidates), a
// number in [lo, hi], one of a list.
func AskBoolean() *AskerBound { return &AskerBound{Kind: AskBool} }
func AskCount() *AskerBound {
	return &AskerBound{Kind: AskInt, Min: 1, Max: MaxAskedCandidates}
}
func AskNumber(lo, hi float64) *AskerBound { return &AskerBound{Kind: AskFloat, Min: lo, Max: hi} }
func AskOneOf(choices ...string) *AskerBound {
	return &AskerBound{Kind: AskChoice, Choices: choices}
}

// check refuses a value outside the bound, saying what is allowed.
func (b *AskerBound) check(v string) error {
	switch b.Kind {
	case AskBool:
		if _, err := strconv.ParseBool(v); err != nil {
			return fmt.Errorf("%q: want true or false", v)
		}
	case AskInt:
		n, err := strconv.ParseInt(strings.TrimSpace(v), 10, 64)
		if err != nil || float64(n) < b.Min || float64(n) > b.Max {
			return fmt.Errorf("%q: use an integer from %g to %g", v, b.Min, b.Max)
		}
	case AskFloat:
		f, err := strconv.ParseFloat(strings.TrimSpace(v), 64)
		if err != nil || !(f >= b.Min && f <= b.Max) { // NaN fails too
			return fmt.Errorf("%q: use a number from %g to %g", v, b.Min, b.Max)
		}
	case AskChoice:
		if !slices.Contains(b.Choices, v) {
			return fmt.Errorf("%q: use one of %s", v, strings.Join(b.Choices, ", "))
		}
	default:
		return fmt.Errorf("%q: not settable by a question", v)
	}
	return nil
}

// OptionError names the option a question set wrongly and what is
// allowed.
type OptionError struct {
	Option string
	Err    error
}

func (e *OptionError) Error() string { return "option " + e.Option + " " + e.Err.Error() }
func (e *OptionError) Unwrap() error { return e.Err }

// CheckAsked checks the options a question set, before any default is
// filled in: every name must be one the agent lets an asker set
// (Option.Asker) and every value within its bound. The first bad option,
// in name order, is returned as an *OptionError.
func (d *Definition) CheckAsked(opts map[string]string) error {
	names := slices.Sorted(maps.Keys(opts))
	for _, name := range names {
		i := slices.IndexFunc(d.Options, func(o Option) bool { return o.Name == name })
		switch {
		case i < 0:
			return &OptionError{Option: name, Err: fmt.Errorf("is not an option of agent %s (a question may set: %s)", d.Name, strings.Join(d.AskerOptions(), ", "))}
		case d.Options[i].Asker == nil:
			return &OptionError{Option: name, Err: fmt.Errorf("is the operator's: a question may not set it (it may set: %s)", strings.Join(d.AskerOptions(), ", "))}
		}
		if err := d.Options[i].Asker.check(opts[name]); err != nil {
			return &OptionError{Option: name, Err: err}
		}
	}
	return nil
}

// AskerOptions lists the options a question may set, in declared order.
func (d *Definition) AskerOptions() []string {
	var out []string
	for _, o := range d.Options {
		if o.Asker != nil {
			out = append(out, o.Name)
		}
	}
	if len(out) == 0 {
		return []string{"none"}
	}
	return out
}

// OptVotes names the option of an agent whose candidate count is the
// run's: an agent that declares it (or a member's, MEMBER.votes, under a
// composite agent) gets a run's --votes, or a question's votes, there
// unless the options set it (RunOptions). Agents that count their
// candidates otherwise (PExA's passes, RAISE's rounds) do not declare it.
const OptVotes = "votes"

// Task is one unit of an agent's work. The runtime wraps it in an envelope
// with the run, the example, the agent, the seed and the cost carried so
// far.
type Task struct {
	Kind string `json:"kind"`
	// ID names the task within its example and agent; it makes the message
	// id, so publishing the same task twice creates one task.
	ID    string `json:"id"`
	Round int    `json:"round"`
	// Slots are the candidate indices of the round whose results this task
	// (or the tasks it continues into) owes. A task that exhausts its
	// deliveries is recorded as a failed result in each, so the round still
	// completes.
	Slots   []int           `json:"slots"`
	Payload json.RawMessage `json:"payload,omitempty"`
	// Join makes the task one part of a fan-out; nil for a lone task.
	Join *Join `json:"join,omitempty"`
}

// Join gathers a fan-out: each of Of tasks records one Part (its
// Outcome.Part) under Group, and when the last part is in, Then is
// published once, carrying every part's cost. A part whose task exhausts
// its deliveries is recorded as lost, so the group still completes. Then
// reads the parts with Store.Parts.
type Join struct {
	Group string `json:"group"`
	Part  int    `json:"part"`
	Of    int    `json:"of"`
	Then  Task   `json:"then"`
}

// Part is one recorded part of a join: Value, or Lost saying why there is
// none.
type Part struct {
	Index int
	Value json.RawMessage
	Lost  string
}

// NewTask builds a task with a JSON payload.
func NewTask(kind, id string, round int, slots []int, payload any) (Task, error) {
	t := Task{Kind: kind, ID: id, Round: round, Slots: slots}
	if payload != nil {
		b, err := json.Marshal(payload)
		if err != nil {
			return t, fmt.Errorf("task %s payload: %w", id, err)
		}
		t.Payload = b
	}
	return t, nil
}

// Result statuses. Only StatusOK results take part in a vote; StatusFailed
// is written by the runtime for a task that exhausted its deliveries.
const (
	StatusOK     = "ok"
	StatusEmpty  = "empty"
	StatusError  = "error"
	StatusGaveUp = "gave_up"
	StatusFailed = "failed"
)

// Result is one candidate a task records for its round.
type Result struct {
	Index  int
	SQL    string
	Status string
	Error  string
	Rows   int
	// CSV is the full result, stored by the runtime as a blob.
	CSV string
	// Payload is the agent's own record of the candidate.
	Payload json.RawMessage
}

// Outcome is what one task produced: candidate results, tasks that continue
// its work in the same round, or both. The task's cost (and what it
// inherited) travels with its first result, else its first continuation.
type Outcome struct {
	Results []Result
	Next    []Task
	// Part is the task's contribution to its join (Task.Join).
	Part json.RawMessage
}

// Dispatch opens a round: Expect results are awaited, Tasks are published.
type Dispatch struct {
	Round  int
	Expect int
	Tasks  []Task
}

// Candidate is a recorded result as the decision step sees it.
type Candidate struct {
	Round, Index int
	SQL          string
	Status       string
	Error        string
	Rows         int
	CSV          string
	Payload      json.RawMessage
	// Worker is the process that produced it.
	Worker string
}

// Decision is the decision step's answer: more work (Next), or the final
// answer — Winner (nil when no candidate is usable), how sure, by which
// method, and which candidates agreed with it.
type Decision struct {
	Next       *Dispatch
	Winner     *Candidate
	Confidence string
	Method     string
	// Valid counts the candidates that took part in the vote.
	Valid int
	// Voted lists the indices of the valid candidates the vote counted
	// (after exploring, ReFoRCE's counts the exploration round alone); nil
	// when the agent does not say, and a composite agent then counts all
	// it was given.
	Voted []int
	// Agreed lists the indices of the candidates whose answers agree with
	// the winner's, itself included.
	Agreed []int
	// Members are the decisions of the agents a composite agent (the
	// ensemble) combined, with Rule naming how.
	Members []Member
	Rule    string
	// Sampling is the adaptive sampling rule's verdict (package
	// sampling); nil under fixed sampling.
	Sampling *Sampling
}

// Sampling is an adaptive-sampling verdict: the rule's posterior
// confidence in the majority after the last wave drawn, and, when it
// settled the example early, how many candidates (passes, rounds) were
// drawn by then; StoppedAfter is 0 when every slot was drawn.
type Sampling struct {
	StoppedAfter int
	Posterior    float64
}

// Member is one member agent's own decision inside a composite one.
type Member struct {
	Agent      string
	Winner     *Candidate
	Confidence string
	Method     string
	Valid      int
	// Agrees is whether the member's answer agrees with the final one.
	Agrees bool
	// Sampling is the member's own adaptive-sampling verdict; nil under
	// fixed sampling.
	Sampling *Sampling
}

// Store is the durable, cluster-wide storage the runtime lends an agent,
// scoped to one example and agent.
type Store interface {
	// Once returns the value stored under name, computing it with fn at most
	// once across the cluster.
	Once(ctx context.Context, name string, fn func(context.Context) (string, error)) (string, error)
	Get(ctx context.Context, name string) (string, bool, error)
	Set(ctx context.Context, name, value string) error
	// PutBlob stores content-addressed bytes and returns their reference.
	// GetBlob's error wraps ErrBlobLost when the store no longer holds
	// ref: a task that returns it (wrapped) has its producer run again.
	PutBlob(ctx context.Context, b []byte) (string, error)
	GetBlob(ctx context.Context, ref string) ([]byte, error)
	// Parts returns a join's recorded parts by index.
	Parts(ctx context.Context, group string) ([]Part, error)
	// Checkpoints keep a long task's chain (a RAISE trajectory, a PExA
	// turn) across its deliveries: the task saves its state after each
	// LLM step under a name of its own (its task id, its Once name), a
	// redelivery loads it and continues from there instead of from
	// scratch, and the task drops it once its outcome is stored. A
	// checkpoint not dropped expires (a day after its last save in the
	// cluster). LoadCheckpoint and SaveCheckpoint below read and write
	// JSON.
	Checkpoint(ctx context.Context, name string) ([]byte, bool, error)
	SaveCheckpoint(ctx context.Context, name string, state []byte) error
	DropCheckpoint(ctx context.Context, name string) error
}

// LoadCheckpoint reads the checkpoint name into v (JSON) and says whether
// there was one.
func LoadCheckpoint(ctx context.Context, s Store, name string, v any) (bool, error) {
	b, ok, err := s.Checkpoint(ctx, name)
	if err != nil || !ok {
		return false, err
	}
	if err := json.Unmarshal(b, v); err != nil {
		return false, fmt.Errorf("checkpoint %s: %w", name, err)
	}
	return true, nil
}

// SaveCheckpoint stores v (JSON) as the checkpoint name.
func SaveCheckpoint(ctx context.Context, s Store, name string, v any) error {
	b, err := json.Marshal(v)
	if err != nil {
		return fmt.Errorf("checkpoint %s: %w", name, err)
	}
	return s.SaveCheckpoint(ctx, name, b)
}

// Cache is a cluster-wide key-value cache shared by every run (e.g. schema
// linking answers keyed by database, table and question).
type Cache interface {
	Get(ctx context.Context, key string) (string, bool, error)
	Set(ctx context.Context, key, value string) error
}

// Context is what a task or a decision sees of its run and example.
type Context struct {
	Run  string
	Seed uint64
	// Dataset and Example hold no gold (View.Context builds them).
	Dataset *dataset.Dataset
	Example *dataset.Example
	// GoldIdentifiers are the identifiers the example's gold SQL mentions,
	// for a gold ablation (GoldAblation); nil otherwise.
	GoldIdentifiers []string
	// Schema opens the run's warehouses for live schema reads.
	Schema *localdb.Warehouses
	// Warehouse opens the example's warehouse within its quota; nil where
	// no warehouse is served (the voter).
	Warehouse func(ctx context.Context) (warehouse.Warehouse, error)
	Store     Store
	// Ledger receives the task's costs by stage.
	Ledger cost.Ledger
	Worker string
	Log    *zap.Logger
}

// Agent is what the runtime runs: its tasks run with the handlers its
// definition registered (Register, Definition.Execute).
type Agent interface {
	// Start returns an example's first round (in the coordinator).
	Start(ctx context.Context, c *Context) (*Dispatch, error)
	// Decide is called once a round's expected results are in (or its
	// deadline passed) with every candidate of this and earlier rounds, by
	// round then index.
	Decide(ctx context.Context, c *Context, round int, cands []*Candidate) (*Decision, error)
}

// Config is what an agent is built from: its options from the manifest and
// the process's clients. LLM is nil in roles that make no calls.
type Config struct {
	Options map[string]string
	LLM     llm.Client
	Cache   Cache
	Log     *zap.Logger
}

// Definition registers an agent.
type Definition struct {
	Name string
	Doc  string
	// Kinds are the agent's task kinds, each registered with its pool,
	// payload type and handler (Register).
	Kinds   Kinds
	Options []Option
	New     func(cfg Config) (Agent, error)
	// Load estimates what one example asks of the pools and quotas under
	// these options (checked); nil counts one task of one call.
	Load func(opts map[string]string) Load
}

// Load is an example's demand: Width tasks in flight at once at its
// widest, Calls LLM calls in all, Depth of them one after another on its
// longest chain (how long an example takes, in calls). The coordinator
// sizes its admission window with it.
type Load struct {
	Width, Calls, Depth int
}

// LoadOf is def's estimate for these options, or one task of one call
// when it declares none; a Depth left unset is the calls per task at the
// widest.
func (d *Definition) LoadOf(opts map[string]string) Load {
	l := Load{Width: 1, Calls: 1}
	if d.Load != nil {
		if got := d.Load(opts); got.Width > 0 && got.Calls > 0 {
			l = got
		}
	}
	if l.Depth <= 0 {
		l.Depth = max(1, l.Calls/l.Width)
	}
	return l
}

// TakesVotes reports whether the agent declares OptVotes: its candidate
// count is the run's.
func (d *Definition) TakesVotes() bool {
	return slices.ContainsFunc(d.Options, func(o Option) bool { return o.Name == OptVotes })
}

// RunOptions are the options an agent runs with in a run (or question) of
// votes candidates: each declared OptVotes, its own or a member's, that
// opts leave unset takes votes (when positive); then CheckOptions.
func (d *Definition) RunOptions(opts map[string]string, votes int) (map[string]string, error) {
	out := maps.Clone(opts)
	if out == nil {
		out = map[string]string{}
	}
	for _, o := range d.Options {
		if _, set := out[o.Name]; !set && votes > 0 && o.Name[strings.LastIndexByte(o.Name, '.')+1:] == OptVotes {
			out[o.Name] = strconv.Itoa(votes)
		}
	}
	return d.CheckOptions(out)
}

// Kind returns the registered kind called name.
func (d *Definition) Kind(name string) (Kind, bool) { return d.Kinds.Lookup(name) }

// CheckOptions refuses options the agent does not declare and fills in the
// defaults, so the manifest records every option in effect.
func (d *Definition) CheckOptions(opts map[string]string) (map[string]string, error) {
	out := map[string]string{}
	for _, o := range d.Options {
		out[o.Name] = o.Default
	}
	for k, v := range opts {
		if _, ok := out[k]; !ok {
			var names []string
			for _, o := range d.Options {
				names = append(names, o.Name)
			}
			return nil, fmt.Errorf("agent %s has no option %q (its options: %s)", d.Name, k, strings.Join(names, ", "))
		}
		out[k] = v
	}
	return out, nil
}

// Registry holds the agents a process can run.
type Registry struct {
	defs map[string]*Definition
	def  string
}

// NewRegistry registers defs, the first of them the default agent (the one
// a run or a question uses when it names none); a duplicate name or a kind
// without a pool is a programming error reported at once.
func NewRegistry(defs ...*Definition) (*Registry, error) {
	r := &Registry{defs: map[string]*Definition{}}
	if len(defs) > 0 {
		r.def = defs[0].Name
	}
	for _, d := range defs {
		if _, dup := r.defs[d.Name]; dup {
			return nil, fmt.Errorf("agent %s registered twice", d.Name)
		}
		if err := d.Kinds.Err(); err != nil {
			return nil, fmt.Errorf("agent %s: %w", d.Name, err)
		}
		r.defs[d.Name] = d
	}
	return r, nil
}

// Lookup returns the agent called name, or an error naming the agents there
// are.
func (r *Registry) Lookup(name string) (*Definition, error) {
	if d, ok := r.defs[name]; ok {
		return d, nil
	}
	return nil, fmt.Errorf("unknown agent %q: the agents are %s", name, strings.Join(r.Names(), ", "))
}

// Default is the name of the default agent: the first registered.
func (r *Registry) Default() string {
	if r == nil {
		return ""
	}
	return r.def
}

// Names lists the registered agents in order.
func (r *Registry) Names() []string {
	out := make([]string, 0, len(r.defs))
	for n := range r.defs {
		out = append(out, n)
	}
	sort.Strings(out)
	return out
}

type permanent struct{ err error }

func (p permanent) Error() string { return p.err.Error() }
func (p permanent) Unwrap() error { return p.err }

// ErrBlobLost is what Store.GetBlob wraps for a reference the store no
// longer holds (Redis lost its last writes: a restart from an older
// snapshot, a lagging replica promoted). A continuation whose Execute
// returns it, wrapped, is not failed: the runtime runs the task that
// published it again, which writes its inputs again and publishes it anew.
var ErrBlobLost = errors.New("blob lost: the store no longer holds it")

// Permanent marks an Execute error that redelivery cannot fix (a malformed
// payload, an example whose warehouse cannot open): the task gives up at
// once and its slots are recorded failed.
func Permanent(err error) error { return permanent{err} }

// IsPermanent reports whether err came from Permanent.
func IsPermanent(err error) bool {
	var p permanent
	return errors.As(err, &p)
}

type unrunnable struct{ err error }

func (u unrunnable) Error() string { return u.err.Error() }
func (u unrunnable) Unwrap() error { return u.err }

// Unrunnable marks a Start error that ends the example as failed (its
// database information cannot be built, say) rather than stopping the run.
func Unrunnable(err error) error { return unrunnable{err} }

// IsUnrunnable reports whether err came from Unrunnable.
func IsUnrunnable(err error) bool {
	var u unrunnable
	return errors.As(err, &u)
}

// Seed derives the seed of one LLM call (or tie-break) from the run seed,
// the example, the round, the candidate and the step, so that with a
// deterministic endpoint a run's answers do not depend on scheduling,
// worker count or redeliveries.
func Seed(run uint64, example string, round, candidate int, step string) int64 {
	h := fnv.New64a()
	fmt.Fprintf(h, "%d\x00%s\x00%d\x00%d\x00%s", run, example, round, candidate, step)
	return int64(h.Sum64() & (1<<63 - 1))
}

// Range returns the slots from..from+n-1.
func Range(from, n int) []int {
	out := make([]int, n)
	for i := range out {
		out[i] = from + i
	}
	return out
}

// OptionBool and OptionInt read a checked option.
func OptionBool(opts map[string]string, name string) (bool, error) {
	v := opts[name]
	if v == "" {
		return false, nil
	}
	b, err := strconv.ParseBool(v)
	if err != nil {
		return false, fmt.Errorf("option %s=%q: want true or false", name, v)
	}
	return b, nil
}

// OptionInt reads an integer option.
func OptionInt(opts map[string]string, name string) (int, error) {
	v := opts[name]
	if v == "" {
		return 0, nil
	}
	n, err := strconv.Atoi(v)
	if err != nil {
		return 0, fmt.Errorf("option %s=%q: want an integer", name, v)
	}
	return n, nil
}

// OptionReader reads an agent's options into its config, collecting every
// bad value, so an agent's ConfigFromOptions is a list of fields.
type OptionReader struct {
	Agent string
	Opts  map[string]string
	errs  []error
}

// Int sets *dst from the option name when present, refusing values below
// least.
func (r *OptionReader) Int(name string, dst *int, least int) {
	if _, ok := r.Opts[name]; !ok {
		return
	}
	v, err := OptionInt(r.Opts, name)
	switch {
	case err != nil:
		r.errs = append(r.errs, err)
	case v < least:
		r.errs = append(r.errs, fmt.Errorf("%s option %s=%d: use %d or more", r.Agent, name, v, least))
	default:
		*dst = v
	}
}

// Bool sets *dst from the option name when present.
func (r *OptionReader) Bool(name string, dst *bool) {
	if _, ok := r.Opts[name]; !ok {
		return
	}
	v, err := OptionBool(r.Opts, name)
	if err != nil {
		r.errs = append(r.errs, err)
		return
	}
	*dst = v
}

// Err is every bad value read, joined.
func (r *OptionReader) Err() error { return errors.Join(r.errs...) }
