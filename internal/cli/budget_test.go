package cli

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"
)

// TestMaxCostStopsAndResumes, through the binary and the simulated LLM
// priced with --llm-price: a run with --max-cost a third of what the whole
// run costs stops admitting examples at the budget, exits 3 naming the
// spend (the money of exactly the examples it finished), and resumed with
// a higher budget it ends with the answers of an unbudgeted run.
func TestMaxCostStopsAndResumes(t *testing.T) {
	t.Parallel()
	bin := quorumBinary(t)
	dir := t.TempDir()
	const examples = 6
	quorum := func(out, id string, extra ...string) (string, int) {
		t.Helper()
		ctx, cancel := context.WithTimeout(context.Background(), 120*time.Second)
		defer cancel()
		args := append([]string{"run", "--dataset", demo, "--limit", strconv.Itoa(examples), "--votes", "2", "--out", out,
			"--state-dir", filepath.Join(out, ".state"), "--run-id", id, "--log-level", "error",
			"--llm-price", "gpt-4o=1000,500,3000"}, extra...)
		cmd := exec.CommandContext(ctx, bin, args...)
		cmd.Env = append(os.Environ(), "OPENAI_API_KEY=", "OPENAI_BASE_URL=")
		var buf bytes.Buffer
		cmd.Stdout, cmd.Stderr = &buf, &buf
		_ = cmd.Run()
		if ctx.Err() != nil {
			t.Fatalf("quorum %s did not end in 120s\n%s", strings.Join(args, " "), buf.String())
		}
		return buf.String(), cmd.ProcessState.ExitCode()
	}
	type example struct {
		Status string
		SQL    string
		Money  float64
	}
	report := func(out string) (map[string]example, float64) {
		t.Helper()
		b, err := os.ReadFile(filepath.Join(out, "run.json"))
		if err != nil {
			t.Fatal(err)
		}
		var rep struct {
			Examples []struct {
				InstanceID string `json:"instance_id"`
				Status     string `json:"status"`
				Cost       struct {
					LLM struct {
						Money float64 `json:"money"`
					} `json:"llm"`
				} `json:"cost"`
			} `json:"examples"`
			Totals struct {
				Cost struct {
					LLM struct {
						Money float64 `json:"money"`
					} `json:"llm"`
				} `json:"cost"`
			} `json:"totals"`
		}
		if err := json.Unmarshal(b, &rep); err != nil {
			t.Fatal(err)
		}
		m := map[string]example{}
		for _, e := range rep.Examples {
			sql, _ := os.ReadFile(filepath.Join(out, e.InstanceID+".sql"))
			m[e.InstanceID] = example{Status: e.Status, SQL: string(sql), Money: e.Cost.LLM.Money}
		}
		return m, rep.Totals.Cost.LLM.Money
	}

	free := filepath.Join(dir, "free")
	if text, code := quorum(free, "free"); code != 0 {
		t.Fatalf("the unbudgeted run: exit %d\n%s", code, text)
	}
	want, total := report(free)
	if len(want) != examples || total <= 0 {
		t.Fatalf("the unbudgeted run: %d examples costing %v, want %d at a positive cost", len(want), total, examples)
	}
	for id, e := range want {
		// An answered example has an answer file: the budgeted session's
		// finished examples are told by theirs.
		if e.Status != "answered" {
			t.Fatalf("the unbudgeted run left %s %s; the test needs every example answered", id, e.Status)
		}
	}

	out := filepath.Join(dir, "budget")
	budget := total / 3
	text, code := quorum(out, "budget", "--max-cost", fmt.Sprint(budget))
	if code != exitAborted || !strings.Contains(text, "stopped at its budget") || !strings.Contains(text, "--max-cost") {
		t.Fatalf("with --max-cost %v of a run costing %v: exit %d, want 3 with a message naming the budget\n%s", budget, total, code, text)
	}
	spentRE := regexp.MustCompile(`spent ([0-9.]+) of --max-cost`)
	sm := spentRE.FindStringSubmatch(text)
	if sm == nil {
		t.Fatalf("the message names no spend:\n%s", text)
	}
	spent, _ := strconv.ParseFloat(sm[1], 64)
	// The examples that finished, by their answer files; each cost what it
	// cost in the unbudgeted run (the simulated LLM is seeded per request).
	var done []string
	var theirs float64
	for id, e := range want {
		if _, err := os.Stat(filepath.Join(out, id+".sql")); err == nil {
			done = append(done, id)
			theirs += e.Money
		}
	}
	if len(done) == 0 || len(done) >= examples {
		t.Fatalf("the budgeted session answered %d of %d examples, want some and not all\n%s", len(done), examples, text)
	}
	if d := spent - theirs; d > 1e-3 || d < -1e-3 {
		t.Errorf("the message names a spend of %v; the %d examples it finished cost %v", spent, len(done), theirs)
	}
	// The next example would have passed the budget by the mean so far.
	if mean := spent / float64(len(done)); spent+mean <= budget {
		t.Errorf("stopped at %v of %v with a mean of %v per example: one more fitted", spent, budget, mean)
	}

	if text, code := quorum(out, "budget", "--max-cost", fmt.Sprint(10*total)); code != 0 || !strings.Contains(text, "Resuming run budget") {
		t.Fatalf("resumed with a higher budget: exit %d, want 0\n%s", code, text)
	}
	got, gotTotal := report(out)
	for id, w := range want {
		if g := got[id]; g.Status != w.Status || g.SQL != w.SQL {
			t.Errorf("%s: resumed run has %s %q, the unbudgeted run %s %q", id, g.Status, g.SQL, w.Status, w.SQL)
		}
	}
	if d := gotTotal - total; d > 1e-6*total || d < -1e-6*total {
		t.Errorf("the resumed run cost %v in all, the unbudgeted %v: something was paid twice or lost", gotTotal, total)
	}
}
