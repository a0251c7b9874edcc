// Package runenv is what every role process shares: the queue, the blob
// store, the run state, the LLM client, and per run the dataset, its
// warehouses and the agent configured from the run's manifest. Workers serve
// many runs; each run's dataset is loaded once.
package runenv

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sync"

	"go.uber.org/zap"

	"github.com/quorumsql/quorum/pkg/agents/reforce"
	"github.com/quorumsql/quorum/pkg/agents/reforce/dbinfo"
	"github.com/quorumsql/quorum/pkg/blob"
	"github.com/quorumsql/quorum/pkg/dataset"
	"github.com/quorumsql/quorum/pkg/llm"
	"github.com/quorumsql/quorum/pkg/metrics"
	"github.com/quorumsql/quorum/pkg/queue"
	"github.com/quorumsql/quorum/pkg/runtime/runstate"
	"github.com/quorumsql/quorum/pkg/warehouse"
	"github.com/quorumsql/quorum/pkg/warehouse/registry"
	"github.com/quorumsql/quorum/pkg/warehouse/sqlite"
)

// Env is one process's shared environment.
type Env struct {
	Queue   *queue.Queue
	Blobs   *blob.Store
	State   *runstate.Store
	LLM     llm.Client
	Linker  *dbinfo.Linker
	Log     *zap.Logger
	Metrics *metrics.Metrics
	// Name identifies the process in results and logs.
	Name string
	// Warehouses routes examples to the configured warehouses and opens
	// them within their quotas; nil serves SQLite files only.
	Warehouses *registry.Registry

	mu       sync.Mutex
	runs     map[string]*Run
	datasets map[string]*loaded
}

type loaded struct {
	ds  *dataset.Dataset
	set *sqlite.Set
}

// Run is one run as this process sees it.
type Run struct {
	Manifest *runstate.Manifest
	DS       *dataset.Dataset
	whs      *dataset.Warehouses
	// Agent is nil in processes without an LLM client.
	Agent *reforce.Agent
	reg   *registry.Registry
}

// Warehouse returns the warehouse of an example, within its quota.
func (r *Run) Warehouse(ctx context.Context, e *dataset.Example) (warehouse.Warehouse, error) {
	if r.reg == nil {
		return r.whs.For(e)
	}
	return r.reg.Open(ctx, e, r.whs)
}

// Route names the warehouse (subject token) of an example.
func (r *Run) Route(e *dataset.Example) (string, error) {
	if r.reg == nil {
		return string(e.Dialect), nil
	}
	return r.reg.File.Route(e)
}

// Warehouses is the run's warehouse opener (for live schema reads).
func (r *Run) Warehouses() *dataset.Warehouses { return r.whs }

// Run returns a run's environment, loading its dataset on first use.
func (e *Env) Run(ctx context.Context, id string) (*Run, error) {
	e.mu.Lock()
	if r, ok := e.runs[id]; ok {
		e.mu.Unlock()
		return r, nil
	}
	e.mu.Unlock()
	m, err := e.State.Manifest(ctx, id)
	if err != nil {
		return nil, err
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	if r, ok := e.runs[id]; ok {
		return r, nil
	}
	key := m.Dataset + "\x00" + m.TaskFile + "\x00" + m.SQLiteDir
	l, ok := e.datasets[key]
	if !ok {
		ds, err := dataset.Load(m.Dataset, dataset.Options{TaskFile: m.TaskFile, SQLiteDir: m.SQLiteDir})
		if err != nil {
			return nil, fmt.Errorf("run %s: %w", id, err)
		}
		l = &loaded{ds: ds, set: &sqlite.Set{}}
		if e.datasets == nil {
			e.datasets = map[string]*loaded{}
		}
		e.datasets[key] = l
	}
	// Roles without an LLM (coordinator, voter) get no agent.
	var agent *reforce.Agent
	if e.LLM != nil {
		if agent, err = reforce.New(AgentConfig(m), e.LLM); err != nil {
			return nil, err
		}
	}
	r := &Run{Manifest: m, DS: l.ds, whs: &dataset.Warehouses{DS: l.ds, SQLite: l.set}, Agent: agent, reg: e.Warehouses}
	if e.runs == nil {
		e.runs = map[string]*Run{}
	}
	e.runs[id] = r
	return r, nil
}

// AgentConfig is the agent configuration a manifest asks for.
func AgentConfig(m *runstate.Manifest) reforce.Config {
	return reforce.Config{Votes: m.Votes, NoExploration: m.NoExploration, FormatRestriction: m.FormatRestriction,
		SelfConsistency: m.SelfConsistency, CTERefine: m.CTERefine}
}

// Close closes the warehouses opened by the process.
func (e *Env) Close() {
	e.mu.Lock()
	defer e.mu.Unlock()
	for _, l := range e.datasets {
		_ = l.set.Close()
	}
	if e.Warehouses != nil {
		_ = e.Warehouses.Close()
	}
}

// Prompt is an example's table information as stored for the workers.
type Prompt struct {
	TableInfo   string `json:"table_info"`
	TableStruct string `json:"table_struct"`
}

// PutPrompt stores a prompt and returns its reference.
func (e *Env) PutPrompt(ctx context.Context, info *dbinfo.Info, externalKnowledge string) (string, error) {
	b, _ := json.Marshal(Prompt{TableInfo: info.Prompt(externalKnowledge), TableStruct: info.TableStruct()})
	return e.Blobs.Put(ctx, b)
}

// Prompt loads a stored prompt.
func (e *Env) Prompt(ctx context.Context, ref string) (*Prompt, error) {
	b, err := e.Blobs.Get(ctx, ref)
	if err != nil {
		return nil, err
	}
	var p Prompt
	if err := json.Unmarshal(b, &p); err != nil {
		return nil, fmt.Errorf("prompt %s: %w", ref, err)
	}
	return &p, nil
}

// Example converts a dataset example for the agent.
func Example(e *dataset.Example) reforce.Example {
	return reforce.Example{ID: e.ID, Question: e.Question, Dialect: e.Dialect, ExternalKnowledge: e.ExternalKnowledge}
}

// Example finds a task's run and example. A run or example that does not
// exist is a permanent error: redelivering the task cannot help.
func (e *Env) Example(ctx context.Context, runID, exampleID string) (*Run, *dataset.Example, error) {
	run, err := e.Run(ctx, runID)
	if errors.Is(err, runstate.ErrNoRun) {
		return nil, nil, queue.Permanent(err)
	}
	if err != nil {
		return nil, nil, err
	}
	ex, ok := run.DS.Example(exampleID)
	if !ok {
		return nil, nil, queue.Permanent(fmt.Errorf("example %s is not in dataset %s", exampleID, run.Manifest.Dataset))
	}
	return run, ex, nil
}

// Serve works one consumer per warehouse, stage-<warehouse>, over the given
// subjects' stage, until ctx ends. Outcomes are counted in the metrics.
func (e *Env) Serve(ctx context.Context, stage string, stages []string, warehouses []string, base queue.WorkConfig) error {
	if len(warehouses) == 0 {
		return fmt.Errorf("%s worker: no warehouses to serve", stage)
	}
	errc := make(chan error, len(warehouses))
	for _, wh := range warehouses {
		wc := base
		wc.Consumer = stage + "-" + wh
		wc.Filters = nil
		for _, s := range stages {
			wc.Filters = append(wc.Filters, queue.Subject("*", s, wh))
		}
		wc.Logger = e.Log
		wc.Observe = func(outcome string, redelivered bool) {
			if e.Metrics == nil {
				return
			}
			e.Metrics.Tasks.WithLabelValues(stage, wh, outcome).Inc()
			if redelivered {
				e.Metrics.Redeliveries.WithLabelValues(stage, wh).Inc()
			}
		}
		go func() { errc <- e.Queue.Work(ctx, wc) }()
	}
	var errs []error
	for range warehouses {
		errs = append(errs, <-errc)
	}
	return errors.Join(errs...)
}
