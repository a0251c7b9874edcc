package cli

import (
	"encoding/json"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/quorumsql/quorum/internal/testutil/chromium"
	"github.com/quorumsql/quorum/pkg/outputs"
	"github.com/quorumsql/quorum/pkg/trace"
)

// TestTraceShowsWhatEachAgentDid runs each agent with quorum run and reads
// an example back with quorum trace: the steps the papers describe are
// there, in the order they happened, with their texts.
func TestTraceShowsWhatEachAgentDid(t *testing.T) {
	t.Parallel()
	tests := []struct {
		agent string
		args  []string
		// want are what the tree must show (regular expressions), in order.
		want []string
	}{
		{"pexa", []string{"--agent-option", "passes=2"}, []string{
			`task plan \S+`, `llm plan `, `tool call: generate_testcase`, // the planner's turn
			`task probe \S+`, `llm testcase `, `tool call: execute_sql`, `query sqlite: ok`, `rows: `, // a probe's generator and its SQL batch
			`task propose \S+`, `llm propose `, `llm verify `, // the proposer and the verifier
			`decision on round 0: 2 candidate`, `answer: answered`}},
		{"raise", []string{"--agent-option", "rounds=2"}, []string{
			`task agent \S+`, `llm agent `, `query sqlite: `, // the trajectory's segments and commands
			`task final \S+`, `llm final_[abc] `, // the finals
			`decision on round 0`, `answer: answered`}},
		{"reforce", []string{"--sim-p-gold", "0.3"}, []string{
			`task generate \S+`, `llm generate `, `query sqlite: `, `→ candidate \d+: `,
			`decision on round 0: .*low`, `task explore \S+`, `llm explore `, // the exploration of a low-confidence example
			`decision on round 1`, `answer: `}},
	}
	tests = append(tests, struct {
		agent string
		args  []string
		want  []string
	}{"pexa", []string{"solve"}, tests[0].want})
	for _, tt := range tests {
		cmd := "run"
		if len(tt.args) > 0 && tt.args[0] == "solve" { // the same agent in one process (pkg/runtime/local)
			cmd, tt.args = "solve", []string{"--agent-option", "passes=2"}
		}
		t.Run(cmd+"/"+tt.agent, func(t *testing.T) {
			t.Parallel()
			out := filepath.Join(t.TempDir(), "out")
			args := append([]string{cmd, "--dataset", demo, "--agent", tt.agent, "--out", out,
				"--ids", "local001,local002,local003,local004,local008"}, tt.args...)
			if log, err := run(t, args...); err != nil {
				t.Fatalf("quorum %s: %v\n%s", strings.Join(args, " "), err, log)
			}
			// The example to read: for ReFoRCE one that explored.
			var ex, tree string
			for _, id := range []string{"local001", "local002", "local003", "local004", "local008"} {
				got, err := run(t, "trace", "--out", out, "--example", id)
				if err != nil {
					t.Fatalf("quorum trace --example %s: %v\n%s", id, err, got)
				}
				ex, tree = id, got
				if tt.agent != "reforce" || strings.Contains(got, "task explore") {
					break
				}
			}
			at := 0
			for _, w := range tt.want {
				loc := regexp.MustCompile(w).FindStringIndex(tree[at:])
				if loc == nil {
					t.Fatalf("%s's trace of %s has no %q after offset %d; the tree:\n%s", tt.agent, ex, w, at, cut(tree, 6000))
				}
				at += loc[0]
			}
			// --full prints the texts whole; --json is the same trace.
			full, err := run(t, "trace", "--out", out, "--example", ex, "--full")
			if err != nil || len(full) <= len(tree) || strings.Contains(full, "--full prints it") {
				t.Errorf("--full: %d bytes (the cut tree %d), err %v", len(full), len(tree), err)
			}
			js, err := run(t, "trace", "--out", out, "--example", ex, "--json")
			var x trace.Export
			if err != nil || json.Unmarshal([]byte(js), &x) != nil || x.Example != ex || len(x.Entries) == 0 || len(x.Texts) != 0 {
				t.Fatalf("--json: err %v, %d bytes, example %q, %d entries, %d texts unresolved", err, len(js), x.Example, len(x.Entries), len(x.Texts))
			}
			// report.html links the example's page, which renders in a
			// browser with every entry and its texts collapsed.
			report, err := os.ReadFile(filepath.Join(out, "report.html"))
			if err != nil || !strings.Contains(string(report), `href="examples/`+ex+`.html"`) {
				t.Errorf("report.html does not link examples/%s.html (%v)", ex, err)
			}
			dom := chromium.DumpDOM(t, filepath.Join(out, outputs.ExamplesDir, outputs.PageFile(ex)))
			if !regexp.MustCompile(`<body[^>]*data-ready="yes"`).MatchString(dom) {
				t.Fatalf("the trace page of %s did not render:\n%.2000s", ex, dom)
			}
			if n := strings.Count(dom, `<li class="entry `); n != len(x.Entries) {
				t.Errorf("the trace page of %s shows %d entries, the trace has %d", ex, n, len(x.Entries))
			}
			if !strings.Contains(dom, "<details") || strings.Contains(dom, "<details open") || !strings.Contains(dom, "Simulated LLM") {
				t.Errorf("the trace page of %s: texts not collapsed in <details>, or no simulator banner", ex)
			}
			// Every LLM call of the example is in the trace: the ledger's
			// count in run.json equals the trace's.
			rep, err := outputs.ReadReport(out)
			if err != nil {
				t.Fatal(err)
			}
			calls := 0
			for _, e := range x.Entries {
				steps := []trace.Step(nil)
				if e.Task != nil {
					steps = e.Task.Steps
				}
				for _, s := range steps {
					if s.LLM != nil {
						calls++
						if s.LLM.Text.S == "" && len(s.LLM.ToolCalls) == 0 || len(s.LLM.Messages) == 0 {
							t.Errorf("%s: an LLM call of %s has no prompt or reply in a full trace", ex, e.Task.ID)
						}
					}
				}
			}
			for _, e := range rep.Examples {
				if e.InstanceID == ex && e.Cost.LLMCalls != calls {
					t.Errorf("%s: the trace has %d LLM calls, run.json's ledger %d", ex, calls, e.Cost.LLMCalls)
				}
			}
		})
	}
}

// TestTraceNoneKeepsNothing: --trace none writes no trace, and quorum trace
// says why there is none.
func TestTraceNoneKeepsNothing(t *testing.T) {
	t.Parallel()
	out := filepath.Join(t.TempDir(), "out")
	if log, err := run(t, "run", "--dataset", demo, "--out", out, "--ids", "local001", "--trace", "none"); err != nil {
		t.Fatalf("run: %v\n%s", err, log)
	}
	if _, err := os.Stat(filepath.Join(out, outputs.TracesDir)); !os.IsNotExist(err) {
		t.Errorf("--trace none wrote %s (stat: %v)", outputs.TracesDir, err)
	}
	got, err := run(t, "trace", "--out", out, "--example", "local001")
	if exitCode(err) != exitUsage || !strings.Contains(err.Error(), "kept no trace") {
		t.Errorf("quorum trace on a run without traces: exit %d, %v\n%s", exitCode(err), err, got)
	}
	if _, err := run(t, "run", "--dataset", demo, "--out", t.TempDir(), "--trace", "everything"); exitCode(err) != exitUsage ||
		!strings.Contains(err.Error(), `--trace "everything": want none, summary or full`) {
		t.Errorf("--trace everything: exit %d, %v", exitCode(err), err)
	}
}

func cut(s string, n int) string {
	if len(s) > n {
		return s[:n] + "…"
	}
	return s
}
