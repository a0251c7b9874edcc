package runenv_test

import (
	"context"
	"fmt"
	"testing"

	"go.uber.org/zap"

	"github.com/quorumsql/quorum/internal/runtime/runenv"
	"github.com/quorumsql/quorum/internal/runtime/runstate"
	"github.com/quorumsql/quorum/internal/testutil/redistest"
	"github.com/quorumsql/quorum/pkg/runtime/agent"
)

// TestRunCacheIsBounded: a long-lived worker is never told that a run
// ended, so it keeps at most MaxRuns built, dropping the least recently
// used; a dropped run loads again on its next task.
func TestRunCacheIsBounded(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	reg, err := agent.NewRegistry(spyDef())
	if err != nil {
		t.Fatal(err)
	}
	env := &runenv.Env{State: runstate.New(redistest.Start(t).Client(t)), Agents: reg, Log: zap.NewNop(), Name: "test", MaxRuns: 3}
	t.Cleanup(env.Close)
	run := func(i int) string { return fmt.Sprintf("run-%d", i) }
	for i := range 10 {
		if _, _, err := env.State.CreateManifest(ctx, &runstate.Manifest{Run: run(i), Dataset: "../../../examples/demo", Agent: "spy",
			Examples: []string{"local001"}}); err != nil {
			t.Fatal(err)
		}
	}
	use := func(i int) {
		t.Helper()
		if _, err := env.Run(ctx, run(i)); err != nil {
			t.Fatalf("run %s: %v", run(i), err)
		}
	}
	// run-0 stays in use while run-1..run-9 pass through.
	for i := 1; i < 10; i++ {
		use(0)
		use(i)
	}
	var held []string
	for i := range 10 {
		if env.Cached(run(i)) {
			held = append(held, run(i))
		}
	}
	want := []string{run(0), run(8), run(9)}
	if fmt.Sprint(held) != fmt.Sprint(want) {
		t.Errorf("the process holds %v after 10 runs with MaxRuns 3, want the 3 most recently used %v", held, want)
	}
	use(1)
	if !env.Cached(run(1)) || env.Cached(run(8)) {
		t.Errorf("run-1 used again: cached %v, and the least recently used run-8 still cached %v", env.Cached(run(1)), env.Cached(run(8)))
	}
}
