package agenttest

import (
	"context"
	"net/http/httptest"
	"slices"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"go.uber.org/zap"

	"github.com/quorumsql/quorum/pkg/cost"
	"github.com/quorumsql/quorum/pkg/dataset"
	"github.com/quorumsql/quorum/pkg/llm"
	"github.com/quorumsql/quorum/pkg/llmsim"
	"github.com/quorumsql/quorum/pkg/runtime/agent"
	"github.com/quorumsql/quorum/pkg/runtime/local"
	"github.com/quorumsql/quorum/pkg/warehouse"
)

// Options are what Run runs an agent with.
type Options struct {
	// LLM answers the agent's calls: a Model, or a client of Sim.
	LLM llm.Client
	// Agent are the agent's options, as --agent-option sets them; Votes,
	// when positive, is the run's --votes (it fills the votes option the
	// agent declares, unless Agent sets it).
	Agent map[string]string
	Votes int
	// Cache is the cache shared by every run; nil runs without one, as
	// quorum solve does.
	Cache agent.Cache
	// Seed is the run seed every LLM call's seed derives from.
	Seed uint64
	// Parallel is how many examples run at once (default 4).
	Parallel int
}

// Run runs def over the fixture's examples in process, through the
// runtime's seam as quorum solve does (pkg/runtime/local: Start, each
// task by its kind's handler, joins, redeliveries, Decide), and returns
// each example's outcome by id. Options the agent does not declare, or an
// example that ends in an error (Start or Decide failing), fail the test.
func Run(t testing.TB, def *agent.Definition, f *Fixture, opt Options) map[string]*local.Outcome {
	t.Helper()
	opts, err := def.RunOptions(opt.Agent, opt.Votes)
	if err != nil {
		t.Fatal(err)
	}
	ag, err := def.New(agent.Config{Options: opts, LLM: opt.LLM, Cache: opt.Cache, Log: zap.NewNop()})
	if err != nil {
		t.Fatalf("agent %s: %v", def.Name, err)
	}
	if opt.Parallel <= 0 {
		opt.Parallel = 4
	}
	outs := make([]*local.Outcome, len(f.Examples))
	errs := make([]error, len(f.Examples))
	sem := make(chan struct{}, opt.Parallel)
	var wg sync.WaitGroup
	for i, e := range f.Examples {
		wg.Add(1)
		go func() {
			defer wg.Done()
			sem <- struct{}{}
			defer func() { <-sem }()
			outs[i], errs[i] = local.Solve(context.Background(), local.Config{Agent: ag, Def: def, Options: opts, Dataset: f.Dataset,
				Warehouses: f.Warehouses, Run: "t", Seed: opt.Seed}, e)
		}()
	}
	wg.Wait()
	byID := map[string]*local.Outcome{}
	for i, e := range f.Examples {
		if errs[i] != nil {
			t.Errorf("%s: %v", e.ID, errs[i])
		}
		byID[e.ID] = outs[i]
	}
	if t.Failed() {
		t.FailNow()
	}
	return byID
}

// Context is the context the runtime hands a task or a decision step of
// example e, kept in memory: e and its dataset without gold, its
// warehouse, an empty store (local.Store), a ledger and a quiet log. f is
// e's fixture, or nil for an example without a database (a decision step
// alone).
func Context(t testing.TB, f *Fixture, e *dataset.Example) *agent.Context {
	t.Helper()
	c := &agent.Context{Example: e.WithoutGold()}
	if f != nil {
		c = agent.NewView(f.Dataset, f.Warehouses, nil).Context(e)
		c.Warehouse = func(context.Context) (warehouse.Warehouse, error) { return f.Warehouses.For(e) }
	}
	c.Run, c.Seed, c.Worker = "t", 1, "test"
	c.Store, c.Ledger, c.Log = local.NewStore(), cost.Ledger{}, zap.NewNop()
	return c
}

// Cache is agent.Cache in memory.
type Cache struct {
	mu sync.Mutex
	m  map[string]string
}

// Get implements agent.Cache.
func (c *Cache) Get(_ context.Context, key string) (string, bool, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	v, ok := c.m[key]
	return v, ok, nil
}

// Set implements agent.Cache.
func (c *Cache) Set(_ context.Context, key, value string) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.m == nil {
		c.m = map[string]string{}
	}
	c.m[key] = value
	return nil
}

// Keys lists the keys set, sorted.
func (c *Cache) Keys() []string {
	c.mu.Lock()
	defer c.mu.Unlock()
	out := make([]string, 0, len(c.m))
	for k := range c.m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

// Sim serves llmsim over HTTP for the test and returns it with a client
// of model (gpt-4o when ""; the name picks a persona when cfg has
// personas): the agents' calls go through the real client, retries and
// cost accounting included. cfg.Dataset is the dataset it answers (from
// its gold).
func Sim(t testing.TB, cfg llmsim.Config, model string) (*llmsim.Server, llm.Client) {
	t.Helper()
	sim, err := llmsim.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	ts := httptest.NewServer(sim)
	t.Cleanup(ts.Close)
	if model == "" {
		model = "gpt-4o"
	}
	// Limits far above a healthy answer's time even under -race on a
	// machine loaded many times over its cores: an attempt abandoned at
	// the 15 s default header timeout is served twice and answers change,
	// which an agent's test would read as the agent's fault. The limits
	// themselves are tested in pkg/llm.
	client, err := llm.New(llm.Config{BaseURL: ts.URL + "/v1", APIKey: "x", Default: llm.ModelConfig{Name: model},
		HeaderTimeout: 2 * time.Minute, StallTimeout: 2 * time.Minute, DeadEndpointTimeout: 10 * time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	return sim, client
}

// CheckDefinition checks what the runtime requires of an agent's
// definition: a name, a doc line, a constructor, a load estimate, task
// kinds registered without error (each on a pool, none twice) with a
// doc line each, options with a usage line each, an undeclared option
// refused, and a registry that takes it.
func CheckDefinition(t testing.TB, def *agent.Definition) {
	t.Helper()
	if def.Name == "" || strings.ContainsAny(def.Name, " .") {
		t.Errorf("agent name %q: want a word (it names the agent in flags, manifests and task subjects)", def.Name)
	}
	if def.Doc == "" || def.New == nil || def.Load == nil {
		t.Errorf("agent %s: a doc line, a constructor (New) and a load estimate (Load) are required", def.Name)
	}
	if err := def.Kinds.Err(); err != nil {
		t.Errorf("agent %s: %v", def.Name, err)
	}
	kinds := def.Kinds.List()
	if len(kinds) == 0 {
		t.Errorf("agent %s registers no task kind", def.Name)
	}
	for _, k := range kinds {
		if k.Doc == "" {
			t.Errorf("agent %s: task kind %s has no doc line", def.Name, k.Name)
		}
	}
	if i := slices.IndexFunc(def.Options, func(o agent.Option) bool { return o.Usage == "" }); i >= 0 {
		t.Errorf("agent %s: option %s has no usage line", def.Name, def.Options[i].Name)
	}
	if _, err := def.CheckOptions(map[string]string{"no-such-option": "1"}); err == nil {
		t.Errorf("agent %s accepted an undeclared option", def.Name)
	}
	if _, err := agent.NewRegistry(def); err != nil {
		t.Errorf("agent %s: %v", def.Name, err)
	}
	// A question may restate any option it may set at its default.
	for _, o := range def.Options {
		if o.Asker == nil || o.Default == "" {
			continue
		}
		if err := def.CheckAsked(map[string]string{o.Name: o.Default}); err != nil {
			t.Errorf("agent %s: option %s's default is outside what a question may set: %v", def.Name, o.Name, err)
		}
	}
}
