package cli

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/spf13/cobra"

	"github.com/quorumsql/quorum/pkg/outputs"
)

// TestSolveAblationFlags: solve takes the paper's ablations as their old
// flags (aliases of --agent-option), runs them (one candidate with
// --no-vote) and records them in run.json.
func TestSolveAblationFlags(t *testing.T) {
	t.Parallel()
	out := t.TempDir()
	if _, err := run(t, "solve", "--dataset", demo, "--ids", "local001,local002", "--out", out,
		"--no-vote", "--no-random-selection", "--gold-tables", "--compression", "structural"); err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(filepath.Join(out, "run.json"))
	if err != nil {
		t.Fatal(err)
	}
	var rep outputs.Report
	if err := json.Unmarshal(b, &rep); err != nil {
		t.Fatal(err)
	}
	want := map[string]string{"no-vote": "true", "no-random-selection": "true", "gold-tables": "true", "compression": "structural"}
	for k, v := range want {
		if rep.AgentOptions[k] != v {
			t.Errorf("run.json agent_options %v lacks %s=%s", rep.AgentOptions, k, v)
		}
	}
	for _, e := range rep.Examples {
		if e.Candidates != 1 || e.Rounds != 1 {
			t.Errorf("%s: %d candidates in %d rounds with --no-vote", e.InstanceID, e.Candidates, e.Rounds)
		}
	}
}

func TestAblationFlagErrors(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"solve", "--dataset", demo, "--compression", "zip"}, "compression mode"},
		{[]string{"solve", "--dataset", demo, "--no-compression", "--compression", "structural"}, "contradict"},
		{[]string{"solve", "--dataset", demo, "--agent", "pexa", "--explore-all"}, `agent pexa has no option "explore-all"`},
		{[]string{"solve", "--dataset", demo, "--agent-option", "compression=zip"}, "compression mode"},
		{[]string{"bench", "--agents", "reforce,pexa", "--no-vote"}, "--agent-option sets the options of --agent"},
	} {
		_, err := run(t, tc.args...)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%v: %v, want an error with %q", tc.args, err, tc.want)
		}
	}
}

// TestRunAblationFlagsReachTheManifest: run's ablation flags become the
// reforce options its manifest records.
func TestRunAblationFlagsReachTheManifest(t *testing.T) {
	t.Parallel()
	var f runFlags
	cmd := &cobra.Command{Use: "x", RunE: func(*cobra.Command, []string) error { return nil }}
	f.register(cmd)
	cmd.SetArgs([]string{"--explore-all", "--no-compression", "--gold-schema"})
	if err := cmd.Execute(); err != nil {
		t.Fatal(err)
	}
	if err := f.validate(); err != nil {
		t.Fatal(err)
	}
	name, opts, err := f.agentOptions(cmd)
	if err != nil || name != "reforce" {
		t.Fatal(name, err)
	}
	for _, k := range []string{"explore-all", "no-compression", "gold-schema"} {
		if opts[k] != "true" {
			t.Errorf("options %v lack %s", opts, k)
		}
	}
	if opts["compression"] != "paper" || opts["no-vote"] != "false" {
		t.Errorf("defaults %v", opts)
	}
}

// TestInspectPromptsModes: --prompts --json reports both compression
// modes and their linking calls.
func TestInspectPromptsModes(t *testing.T) {
	t.Parallel()
	out, err := run(t, "inspect", "--prompts", "--json", demo)
	if err != nil {
		t.Fatal(err)
	}
	for _, l := range strings.Split(strings.TrimSpace(out), "\n") {
		var p map[string]any
		if err := json.Unmarshal([]byte(l), &p); err != nil {
			t.Fatal(err)
		}
		if p["chars_after_structural"].(float64) <= 0 || p["chars_after_structural"].(float64) > p["chars_after"].(float64) ||
			p["link_calls_paper"].(float64) != 0 || p["link_calls_structural"].(float64) != 0 {
			t.Errorf("line %s", l)
		}
	}
	out, err = run(t, "inspect", "--prompts", demo)
	if err != nil || !strings.Contains(out, "compression structural: 0 prompts over 200000 chars") {
		t.Errorf("%v\n%s", err, out)
	}
}
