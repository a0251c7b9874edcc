package local_test

import (
	"context"
	"errors"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/quorumsql/quorum/internal/testutil/toyagent"
	"github.com/quorumsql/quorum/pkg/agents/agenttest"
	"github.com/quorumsql/quorum/pkg/runtime/agent"
	"github.com/quorumsql/quorum/pkg/runtime/local"
)

// TestLocalRunsTheSeam: the toy agent runs in process through the same
// seam as on the cluster: continuations, a join whose lost part does not
// fail the slot, a task failing for good recorded failed in its slot, one
// decision per example.
func TestLocalRunsTheSeam(t *testing.T) {
	t.Parallel()
	demo := agenttest.Demo(t)
	for _, tt := range []struct {
		name   string
		toy    toyagent.Config
		ex     string
		status string
		tasks  int
	}{
		{"fan-out", toyagent.Config{FanOut: 3, LoseProbe: 1}, "local001", "ok", 1 + 3*(3+1)},
		{"plain", toyagent.Config{}, "local002", "ok", 1 + 3},
		{"failing", toyagent.Config{FailExample: "local003"}, "local003", "failed", 1 + 3},
	} {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			var execs atomic.Int64
			tt.toy.Executions = &execs
			def := toyagent.Definition(tt.toy)
			ag, err := def.New(agent.Config{Options: map[string]string{agent.OptVotes: "3"}})
			if err != nil {
				t.Fatal(err)
			}
			out, err := local.Solve(context.Background(), local.Config{Agent: ag, Def: def, Dataset: demo.Dataset,
				Warehouses: demo.Warehouses, Run: "t", Seed: 1}, demo.Example(t, tt.ex))
			if err != nil {
				t.Fatal(err)
			}
			if out.Tasks != tt.tasks || len(out.Candidates) != 3 {
				t.Errorf("%d tasks, %d candidates; want %d and 3", out.Tasks, len(out.Candidates), tt.tasks)
			}
			for _, c := range out.Candidates {
				if c.Status != tt.status {
					t.Errorf("candidate %d: %s %s", c.Index, c.Status, c.Error)
				}
				if tt.toy.FanOut > 0 && !strings.Contains(string(c.Payload), `"parts":3,"lost":1`) {
					t.Errorf("candidate %d payload %s", c.Index, c.Payload)
				}
			}
			if tt.status == "ok" && (out.Decision.Winner == nil || out.Decision.Confidence != "high") {
				t.Errorf("decision %+v", out.Decision)
			}
			if tt.status == "failed" && out.Decision.Winner != nil {
				t.Errorf("a failed example has winner %+v", out.Decision.Winner)
			}
		})
	}
}

// TestStore: Once computes a value once however many ask at once; blobs
// are content-addressed; a join's parts come back by index, a part
// recorded twice counted once.
func TestStore(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s := local.NewStore()
	var computed atomic.Int64
	var wg sync.WaitGroup
	for range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			v, err := s.Once(ctx, "info", func(context.Context) (string, error) { computed.Add(1); return "built", nil })
			if err != nil || v != "built" {
				t.Errorf("Once: %q, %v", v, err)
			}
		}()
	}
	wg.Wait()
	if computed.Load() != 1 {
		t.Errorf("computed %d times, want once", computed.Load())
	}
	if _, err := s.Once(ctx, "failing", func(context.Context) (string, error) { return "", errors.New("no") }); err == nil {
		t.Error("Once hid the computation's error")
	}
	if v, err := s.Once(ctx, "failing", func(context.Context) (string, error) { return "second try", nil }); err != nil || v != "second try" {
		t.Errorf("a failed Once is not computed again: %q, %v", v, err)
	}
	ref, _ := s.PutBlob(ctx, []byte("a\n1\n"))
	if again, _ := s.PutBlob(ctx, []byte("a\n1\n")); again != ref || !strings.HasPrefix(ref, "sha256:") {
		t.Errorf("blob refs %s and %s", ref, again)
	}
	if b, err := s.GetBlob(ctx, ref); err != nil || string(b) != "a\n1\n" {
		t.Errorf("GetBlob: %q, %v", b, err)
	}
	if _, err := s.GetBlob(ctx, "sha256:none"); err == nil {
		t.Error("a missing blob was found")
	}
	for _, p := range []agent.Part{{Index: 2, Lost: "gone"}, {Index: 0, Value: []byte(`1`)}, {Index: 2, Value: []byte(`2`)}} {
		s.AddPart("g", p)
	}
	if n := s.AddPart("g", agent.Part{Index: 1, Value: []byte(`1`)}); n != 3 {
		t.Errorf("%d parts, want 3", n)
	}
	parts, _ := s.Parts(ctx, "g")
	if len(parts) != 3 || parts[0].Index != 0 || parts[2].Lost != "gone" {
		t.Errorf("parts %+v: want by index, the first record of part 2 kept", parts)
	}
}
