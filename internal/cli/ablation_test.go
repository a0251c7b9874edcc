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

// TestVotesIsTheAgentsOption: --votes sets the votes option of an agent
// that declares one, --agent-option votes= alone sets the run's count, and
// the two may not disagree; an agent without the option keeps --votes as
// the run's recorded count only.
func TestVotesIsTheAgentsOption(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		args  []string
		votes int
		opt   string
		err   string
	}{
		{nil, 8, "8", ""},
		{[]string{"--votes", "4"}, 4, "4", ""},
		{[]string{"--agent-option", "votes=6"}, 6, "6", ""},
		{[]string{"--votes", "6", "--agent-option", "votes=6"}, 6, "6", ""},
		{[]string{"--votes", "4", "--agent-option", "votes=6"}, 0, "", "name two counts"},
		{[]string{"--agent", "pexa", "--votes", "4"}, 4, "", ""},
		{[]string{"--agent", "ensemble", "--votes", "4"}, 4, "", ""},
	} {
		var f runFlags
		cmd := &cobra.Command{Use: "x", RunE: func(*cobra.Command, []string) error { return nil }}
		f.register(cmd)
		cmd.SetArgs(tc.args)
		if err := cmd.Execute(); err != nil {
			t.Fatal(err)
		}
		_, opts, err := f.agentOptions(cmd)
		if tc.err != "" {
			if err == nil || !strings.Contains(err.Error(), tc.err) {
				t.Errorf("%v: %v, want %q", tc.args, err, tc.err)
			}
			continue
		}
		if err != nil || f.votes != tc.votes || opts["votes"] != tc.opt {
			t.Errorf("%v: votes %d, option %q (%v); want %d and %q", tc.args, f.votes, opts["votes"], err, tc.votes, tc.opt)
		}
		if len(tc.args) > 0 && tc.args[0] == "--agent" && tc.args[1] == "ensemble" && opts["reforce.votes"] != "4" {
			t.Errorf("%v: the ensemble's reforce.votes is %q", tc.args, opts["reforce.votes"])
		}
	}
}
