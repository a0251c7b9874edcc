package cli

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"testing"

	"github.com/quorumsql/quorum/pkg/dataset"
	"github.com/quorumsql/quorum/pkg/llmsim"
	"github.com/quorumsql/quorum/pkg/outputs"
)

// simOverDemo serves llmsim over the demo dataset for one test.
func simOverDemo(t *testing.T) (*llmsim.Server, string) {
	t.Helper()
	ds, err := dataset.Load(demo, dataset.Options{})
	if err != nil {
		t.Fatal(err)
	}
	sim, err := llmsim.New(llmsim.Config{Dataset: ds, Seed: 1})
	if err != nil {
		t.Fatal(err)
	}
	ts := httptest.NewServer(sim)
	t.Cleanup(ts.Close)
	return sim, ts.URL
}

// linkCalls reads llmsim's /stats by_kind["link"].
func linkCalls(t *testing.T, url string) int64 {
	t.Helper()
	resp, err := http.Get(url + "/stats")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var st struct {
		ByKind map[string]int64 `json:"by_kind"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&st); err != nil {
		t.Fatal(err)
	}
	return st.ByKind[string(llmsim.KindLink)]
}

// TestSolveLinksOverBudget: quorum solve links the tables of a prompt over
// --link-budget, as the distributed runtime does (issue 20 item 2): the
// simulator serves link requests, and the example's cost_by_stage "link"
// counts them. Under the default budget the demo's prompts are not linked.
func TestSolveLinksOverBudget(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name   string
		budget []string
		linked bool
	}{
		{"over a small budget", []string{"--link-budget", "1000"}, true},
		{"under the default budget", nil, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			sim, url := simOverDemo(t)
			out := filepath.Join(t.TempDir(), "out")
			args := append([]string{"solve", "--dataset", demo, "--ids", "local011,local001", "--votes", "2", "--no-exploration",
				"--llm-base-url", url + "/v1", "--llm-api-key", "x", "--out", out}, tc.budget...)
			if log, err := run(t, args...); err != nil {
				t.Fatalf("quorum %s: %v\n%s", strings.Join(args, " "), err, log)
			}
			rep, err := outputs.ReadReport(out)
			if err != nil {
				t.Fatal(err)
			}
			served := linkCalls(t, url)
			if served != sim.Stats().ByKind[llmsim.KindLink] {
				t.Errorf("/stats says %d link calls, Stats %d", served, sim.Stats().ByKind[llmsim.KindLink])
			}
			var accounted int64
			for _, e := range rep.Examples {
				c := e.CostByStage["link"]
				if tc.linked && (c == nil || c.LLMCalls == 0) {
					t.Errorf("%s: cost_by_stage[link] = %+v, want linking calls", e.InstanceID, c)
				}
				if c != nil {
					accounted += int64(c.LLMCalls)
				}
				if e.Status != "answered" {
					t.Errorf("%s: %s (%s)", e.InstanceID, e.Status, e.Error)
				}
			}
			t.Logf("llmsim served %d link calls", served)
			if tc.linked && (served == 0 || served != accounted) {
				t.Errorf("llmsim served %d link calls, the examples account %d", served, accounted)
			}
			if !tc.linked && (served != 0 || accounted != 0) {
				t.Errorf("unlinked run made %d link calls (%d accounted)", served, accounted)
			}
		})
	}
}

func TestSolveLinkBudgetFlag(t *testing.T) {
	t.Parallel()
	if _, err := run(t, "solve", "--dataset", demo, "--link-budget", "0", "--out", t.TempDir()); err == nil || !strings.Contains(err.Error(), "link-budget=0") {
		t.Errorf("--link-budget 0: %v", err)
	}
}

// TestModelVoteRunMatchesSolve: the model vote works in the distributed
// runtime (quorum run, through NATS, Redis and the voter) as in quorum
// solve: the same answers, and local035, whose final vote ties at these
// seeds, decided by the model in both. pool-rounds agrees too.
func TestModelVoteRunMatchesSolve(t *testing.T) {
	if testing.Short() {
		t.Skip("runs the demo through the runtime")
	}
	for _, tc := range []struct {
		name      string
		run       []string
		solve     []string
		method    string
		methodFor string
	}{
		{"model-vote", []string{"--agent-option", "model-vote=true"}, []string{"--agent-option", "model-vote=true"}, "model_vote", "local015"},
		{"pool-rounds", []string{"--agent-option", "pool-rounds=true"}, []string{"--agent-option", "pool-rounds=true"}, "", ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := map[string]pinnedRun{}
			methods := map[string]map[string]string{}
			rounds := map[string]int{}
			for _, cmd := range []string{"run", "solve"} {
				out := filepath.Join(t.TempDir(), "out")
				args := []string{cmd, "--dataset", demo, "--ids", "local001,local015,local026,local035", "--out", out}
				if cmd == "run" {
					args = append(append(args, "--run-id", "mv"), tc.run...)
				} else {
					args = append(args, tc.solve...)
				}
				if log, err := run(t, args...); err != nil {
					t.Fatalf("quorum %s: %v\n%s", strings.Join(args, " "), err, log)
				}
				got[cmd] = pin(t, out)
				rep, err := outputs.ReadReport(out)
				if err != nil {
					t.Fatal(err)
				}
				methods[cmd] = map[string]string{}
				for _, e := range rep.Examples {
					methods[cmd][e.InstanceID] = e.Method
					if cmd == "run" {
						rounds[e.InstanceID] = e.Rounds
					}
				}
			}
			if !equalFiles(got["run"].Files, got["solve"].Files) || len(got["run"].Files) != 8 {
				t.Errorf("quorum run and quorum solve wrote different answers:\n%v\n%v", got["run"].Files, got["solve"].Files)
			}
			for id, m := range methods["solve"] {
				if methods["run"][id] != m {
					t.Errorf("%s: run decided by %s, solve by %s", id, methods["run"][id], m)
				}
			}
			if tc.methodFor != "" && (methods["run"][tc.methodFor] != tc.method || rounds[tc.methodFor] != 3) {
				// Rounds 0 and 1, then the vote task's round.
				t.Errorf("%s decided by %q in %d rounds, want %s in 3", tc.methodFor, methods["run"][tc.methodFor], rounds[tc.methodFor], tc.method)
			}
		})
	}
}
