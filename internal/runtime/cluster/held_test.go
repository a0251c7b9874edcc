package cluster_test

import (
	"context"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/quorumsql/quorum/internal/ratelimit"
	"github.com/quorumsql/quorum/internal/runtime/cluster"
	"github.com/quorumsql/quorum/internal/runtime/coordinator"
	"github.com/quorumsql/quorum/internal/runtime/runstate"
	"github.com/quorumsql/quorum/internal/testutil/tier"
	"github.com/quorumsql/quorum/pkg/agents"
	"github.com/quorumsql/quorum/pkg/agents/agenttest"
	"github.com/quorumsql/quorum/pkg/llm"
	"github.com/quorumsql/quorum/pkg/llmsim"
)

// secondCall holds the first chat call until a second one is in flight
// (or a minute passes), then lets every call through, counting the most
// in flight at once.
type secondCall struct {
	next     http.Handler
	mu       sync.Mutex
	inFlight int
	most     int
	first    chan struct{} // closed when a second call arrives
	held     bool
	// joined: the first call was let through by a second's arrival,
	// not by the minute passing.
	joined bool
}

func (s *secondCall) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if !strings.HasSuffix(r.URL.Path, "/chat/completions") {
		s.next.ServeHTTP(w, r)
		return
	}
	s.mu.Lock()
	s.inFlight++
	s.most = max(s.most, s.inFlight)
	holdMe := !s.held
	s.held = true
	if s.inFlight >= 2 {
		select {
		case <-s.first:
		default:
			close(s.first)
		}
	}
	s.mu.Unlock()
	defer func() {
		s.mu.Lock()
		s.inFlight--
		s.mu.Unlock()
	}()
	if holdMe {
		select {
		case <-s.first:
			s.mu.Lock()
			s.joined = true
			s.mu.Unlock()
		case <-time.After(time.Minute):
		case <-r.Context().Done():
		}
	}
	s.next.ServeHTTP(w, r)
}

// TestWaitingTrajectoriesKeepTheLLMBusy: RAISE's trajectories run on the
// explore pool, one long task each that waits for every LLM reply. With
// one explorer slot and a generous quota, a trajectory waiting for its
// reply leaves the slot to another, so the LLM has more than one call in
// flight: the first call is answered only once a second arrives.
func TestWaitingTrajectoriesKeepTheLLMBusy(t *testing.T) {
	tier.Servers(t, "a cluster")
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	fx := agenttest.Demo(t)
	sim, err := llmsim.New(llmsim.Config{Dataset: fx.Dataset, Seed: 3})
	if err != nil {
		t.Fatal(err)
	}
	gate := &secondCall{next: sim, first: make(chan struct{})}
	srv := httptest.NewServer(gate)
	t.Cleanup(srv.Close)
	cl, err := cluster.Start(ctx, cluster.Config{StateDir: t.TempDir(), Agents: agents.Builtin(), Grace: time.Second,
		LLM:        llm.Config{BaseURL: srv.URL + "/v1", APIKey: "sim", Default: llm.ModelConfig{Name: "gpt-4o"}, HeaderTimeout: 2 * time.Minute},
		LLMQuota:   ratelimit.LLMQuota{RequestsPerMinute: 100_000},
		Generators: 1, GeneratorConcurrency: 1, Explorers: 1, ExplorerConcurrency: 1})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(cl.Close)
	def, err := agents.Builtin().Lookup("raise")
	if err != nil {
		t.Fatal(err)
	}
	opts, err := def.RunOptions(map[string]string{"rounds": "1"}, 0)
	if err != nil {
		t.Fatal(err)
	}
	abs, _ := filepath.Abs(demo)
	m := &runstate.Manifest{Run: "held", Dataset: abs, Seed: 1, Votes: 1, Agent: "raise", AgentOptions: opts,
		RoundTimeout: time.Hour, Created: time.Now(), Examples: []string{"local001", "local002", "local010"}}
	rep, err := coordinator.Run(ctx, coordinator.Config{Env: cl.Env, Manifest: m, Out: filepath.Join(t.TempDir(), "out")})
	if err != nil {
		t.Fatal(err)
	}
	gate.mu.Lock()
	most, joined := gate.most, gate.joined
	gate.mu.Unlock()
	if !joined {
		t.Errorf("no second LLM call arrived while the first waited a minute: the waiting trajectory held the one explorer slot")
	}
	if most < 2 {
		t.Errorf("at most %d LLM call in flight with one explorer slot, want more than 1", most)
	}
	for _, e := range rep.Examples {
		if e.Status != "answered" {
			t.Errorf("%s: %s (%s), want answered", e.InstanceID, e.Status, e.Error)
		}
	}
}

// TestOneSlotEachFinishesEveryAgent: with one generator and one explorer
// slot and the default room for waiting tasks, every agent's run ends
// answered. A task waiting on another task's work (a value another task
// computes once, a task lease another delivery holds) leaves its slot
// too; if it did not, the tasks waiting would fill the slots the one
// they wait for needs to come back to, and the run would hang.
func TestOneSlotEachFinishesEveryAgent(t *testing.T) {
	tier.Servers(t, "a cluster")
	t.Parallel()
	fx := agenttest.Demo(t)
	for name, options := range map[string]map[string]string{
		// The format, asked once per example, is what the candidates wait on.
		"reforce": {"format-restriction": "true"}, "pexa": nil, "raise": nil, "ensemble": nil,
	} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
			defer cancel()
			sim, err := llmsim.New(llmsim.Config{Dataset: fx.Dataset, Seed: 5})
			if err != nil {
				t.Fatal(err)
			}
			srv := httptest.NewServer(sim)
			t.Cleanup(srv.Close)
			cl, err := cluster.Start(ctx, cluster.Config{StateDir: t.TempDir(), Agents: agents.Builtin(), Grace: time.Second,
				LLM:        llm.Config{BaseURL: srv.URL + "/v1", APIKey: "sim", Default: llm.ModelConfig{Name: "gpt-4o"}, HeaderTimeout: 2 * time.Minute},
				Generators: 1, GeneratorConcurrency: 1, Explorers: 1, ExplorerConcurrency: 1})
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(cl.Close)
			def, err := agents.Builtin().Lookup(name)
			if err != nil {
				t.Fatal(err)
			}
			opts, err := def.RunOptions(options, 4)
			if err != nil {
				t.Fatal(err)
			}
			abs, _ := filepath.Abs(demo)
			m := &runstate.Manifest{Run: "one-slot-" + name, Dataset: abs, Seed: 1, Votes: 4, Agent: name, AgentOptions: opts,
				RoundTimeout: time.Hour, Created: time.Now(), Examples: []string{"local001", "local002"}}
			rep, err := coordinator.Run(ctx, coordinator.Config{Env: cl.Env, Manifest: m, Out: filepath.Join(t.TempDir(), "out")})
			if err != nil {
				t.Fatalf("%s with one slot per pool: %v", name, err)
			}
			for _, e := range rep.Examples {
				if e.Status != "answered" {
					t.Errorf("%s: %s (%s), want answered", e.InstanceID, e.Status, e.Error)
				}
			}
		})
	}
}
