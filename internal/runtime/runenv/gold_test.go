package runenv_test

import (
	"context"
	"reflect"
	"slices"
	"testing"

	"go.uber.org/zap"

	"github.com/quorumsql/quorum/internal/runtime/runenv"
	"github.com/quorumsql/quorum/internal/runtime/runstate"
	"github.com/quorumsql/quorum/internal/testutil/redistest"
	"github.com/quorumsql/quorum/pkg/dataset"
	"github.com/quorumsql/quorum/pkg/runtime/agent"
)

// spyDef declares an agent with a gold ablation option; it is never run,
// only handed contexts.
func spyDef() *agent.Definition {
	return &agent.Definition{Name: "spy", Options: []agent.Option{{Name: agent.OptGoldTables, Default: "false"}},
		New: func(agent.Config) (agent.Agent, error) { return nil, nil }}
}

// TestContextHidesGold: the context a worker or the voter hands an agent
// has no gold by any path, the gold SQL's identifiers only when the
// manifest's options turn on a gold ablation, and the run keeps its gold
// for the coordinator's scoring.
func TestContextHidesGold(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	reg, err := agent.NewRegistry(spyDef())
	if err != nil {
		t.Fatal(err)
	}
	env := &runenv.Env{State: runstate.New(redistest.Start(t).Client(t)), Agents: reg, Log: zap.NewNop(), Name: "test"}
	t.Cleanup(env.Close)
	for _, tc := range []struct {
		run  string
		opts map[string]string
		ids  bool
	}{
		{"plain", nil, false},
		{"ablation-off", map[string]string{agent.OptGoldTables: "false"}, false},
		{"ablation-on", map[string]string{agent.OptGoldTables: "true"}, true},
	} {
		if _, _, err := env.State.CreateManifest(ctx, &runstate.Manifest{Run: tc.run, Dataset: "../../../examples/demo", Agent: "spy",
			AgentOptions: tc.opts, Examples: []string{"local001"}}); err != nil {
			t.Fatal(err)
		}
		run, ex, err := env.Example(ctx, tc.run, "local001")
		if err != nil {
			t.Fatal(err)
		}
		if ex.Gold.SQL == "" || len(ex.Gold.Results) == 0 || run.DS.GoldDir == "" {
			t.Fatalf("%s: the run's example has gold %+v, gold dir %q: the test would prove nothing", tc.run, ex.Gold, run.DS.GoldDir)
		}
		gold := ex.Gold
		c := env.Context(run, ex, "spy")
		if !reflect.DeepEqual(c.Example.Gold, dataset.Gold{}) || c.Example.ID != ex.ID || c.Example.Question != ex.Question {
			t.Errorf("%s: the agent's example is %+v, want %s without gold", tc.run, c.Example, ex.ID)
		}
		if c.Dataset == run.DS || c.Dataset.GoldDir != "" {
			t.Errorf("%s: the agent's dataset is the run's (%v) or has gold dir %q", tc.run, c.Dataset == run.DS, c.Dataset.GoldDir)
		}
		if e, ok := c.Dataset.Example(ex.ID); !ok || !reflect.DeepEqual(e.Gold, dataset.Gold{}) {
			t.Errorf("%s: the agent's dataset gives example %s (found %v) with gold %+v", tc.run, ex.ID, ok, e.Gold)
		}
		if c.Schema == nil || c.Schema.DS != c.Dataset {
			t.Errorf("%s: the agent's warehouses are not over its own dataset", tc.run)
		}
		want := []string(nil)
		if tc.ids {
			want = agent.GoldIdentifiers(gold.SQL)
		}
		if !slices.Equal(c.GoldIdentifiers, want) || len(want) == 0 && c.GoldIdentifiers != nil {
			t.Errorf("%s: gold identifiers %v, want %v", tc.run, c.GoldIdentifiers, want)
		}
		if !reflect.DeepEqual(ex.Gold, gold) || run.DS.GoldDir == "" {
			t.Errorf("%s: the run lost its gold: %+v, gold dir %q", tc.run, ex.Gold, run.DS.GoldDir)
		}
	}
}
