package cli

import (
	"bytes"
	"context"
	"encoding/json"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/quorumsql/quorum/internal/testutil/tier"
	"github.com/quorumsql/quorum/pkg/outputs"
)

const demo = "../../examples/demo"

// startsRuntime says whether command starts NATS and redis-server (or
// joins a cluster): go test -short skips tests running it.
func startsRuntime(command string) bool {
	switch command {
	case "run", "solve", "serve", "ask", "bench", "coordinator", "generator-worker", "explorer-worker", "voter", "retry-failed":
		return true
	}
	return false
}

func run(t *testing.T, args ...string) (string, error) {
	t.Helper()
	if len(args) > 0 && startsRuntime(args[0]) {
		tier.Servers(t, "quorum "+args[0]+" (NATS, redis-server)")
	}
	cmd := NewRootCmd()
	var out bytes.Buffer
	cmd.SetOut(&out)
	cmd.SetErr(&out)
	cmd.SetArgs(args)
	err := cmd.ExecuteContext(context.Background())
	return out.String(), err
}

// TestGoldSQLScoresFullMarks runs every demo gold SQL through sql mode: the
// warehouse, CSV rendering and evaluator must agree with the gold CSVs.
func TestGoldSQLScoresFullMarks(t *testing.T) {
	t.Parallel()
	gold := filepath.Join(demo, "evaluation_suite", "gold")
	out, err := run(t, "eval", "--mode", "sql", "--json", "--gold", gold, "--pred", filepath.Join(gold, "sql"), "--dataset", demo)
	if err != nil {
		t.Fatal(err)
	}
	var rep struct {
		Instances []map[string]any `json:"instances"`
		Correct   int              `json:"correct"`
		Total     int              `json:"total"`
		EX        float64          `json:"ex"`
	}
	if err := json.Unmarshal([]byte(out), &rep); err != nil {
		t.Fatalf("--json output is not JSON: %v\n%s", err, out)
	}
	if rep.Total < 40 || rep.Correct != rep.Total || rep.EX != 1 {
		for _, i := range rep.Instances {
			if i["score"].(float64) != 1 {
				t.Errorf("%v: %v", i["instance_id"], i["error"])
			}
		}
		t.Fatalf("EX %v (%d/%d), want 1.0 over the whole demo", rep.EX, rep.Correct, rep.Total)
	}
	for _, k := range []string{"instance_id", "score", "error"} {
		if _, ok := rep.Instances[0][k]; !ok || len(rep.Instances[0]) != 3 {
			t.Errorf("instance object %v, want exactly instance_id, score, error", rep.Instances[0])
		}
	}
}

func TestEvalExecResultWithWrongAnswers(t *testing.T) {
	t.Parallel()
	gold := filepath.Join(demo, "evaluation_suite", "gold")
	pred := t.TempDir()
	// local001: right answer; local002: wrong; local003: unreadable file.
	right, err := os.ReadFile(filepath.Join(gold, "exec_result", "local001.csv"))
	if err != nil {
		t.Fatal(err)
	}
	os.WriteFile(filepath.Join(pred, "local001.csv"), right, 0o644)
	os.WriteFile(filepath.Join(pred, "local002.csv"), []byte("n\n99999\n"), 0o644)
	os.WriteFile(filepath.Join(pred, "local003.csv"), nil, 0o644)
	os.WriteFile(filepath.Join(pred, "unknown999.csv"), right, 0o644)
	out, err := run(t, "eval", "--gold", gold, "--pred", pred)
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"local001  1", "local002  0", "result mismatch", "local003  0", "no columns to parse", "ignored unknown999.csv", "EX: 0.3333 (1 of 3 correct)"} {
		if !strings.Contains(out, want) {
			t.Errorf("output lacks %q:\n%s", want, out)
		}
	}
}

func TestEvalBadInput(t *testing.T) {
	t.Parallel()
	tests := []struct {
		args []string
		want string
	}{
		{[]string{"eval", "--pred", "x"}, "--gold and --pred are required"},
		{[]string{"eval", "--gold", t.TempDir(), "--pred", t.TempDir()}, "has no *_eval.jsonl"},
		{[]string{"eval", "--gold", "g", "--pred", "p", "--mode", "csv"}, "unknown evaluation mode"},
		{[]string{"eval", "--gold", filepath.Join(demo, "evaluation_suite", "gold"), "--pred", t.TempDir(), "--mode", "sql"}, "pass --dataset"},
		{[]string{"inspect", filepath.Join(t.TempDir(), "nope")}, "dataset folder"},
		{[]string{"inspect", demo, "--dialect", "oracle"}, "unknown dialect"},
		{[]string{"llmsim"}, "--dataset is required"},
		{[]string{"llmsim", "--dataset", demo, "--listen", "not-an-address"}, "--listen not-an-address"},
	}
	for _, tt := range tests {
		_, err := run(t, tt.args...)
		if err == nil || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("%v: err = %v, want it to contain %q", tt.args, err, tt.want)
		}
	}
}

func TestInspectDemo(t *testing.T) {
	t.Parallel()
	out, err := run(t, "inspect", "--strict", demo)
	if err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	for _, want := range []string{"Examples: 44, runnable 44", "sqlite/shop", "29      279", "Problems: none"} {
		if !strings.Contains(out, want) {
			t.Errorf("inspect output lacks %q:\n%s", want, out)
		}
	}
}

func TestInspectListsEveryProblem(t *testing.T) {
	t.Parallel()
	root := t.TempDir()
	os.WriteFile(filepath.Join(root, "t.jsonl"), []byte("{\"instance_id\":\"local1\",\"db\":\"a\",\"question\":\"q\"}\nnot json\n{\"instance_id\":\"bq2\",\"db\":\"b\",\"question\":\"q\"}\n"), 0o644)
	out, err := run(t, "inspect", "--strict", root)
	if err == nil || exitCode(err) != 2 {
		t.Fatalf("err = %v, want exit status 2 with --strict", err)
	}
	for _, want := range []string{"Problems: 3", "t.jsonl:1: local1: missing sqlite file", "t.jsonl:2: malformed JSON line", "t.jsonl:3: bq2: unknown database"} {
		if !strings.Contains(out, want) {
			t.Errorf("output lacks %q:\n%s", want, out)
		}
	}
}

func TestInspectPromptsJSON(t *testing.T) {
	t.Parallel()
	out, err := run(t, "inspect", "--prompts", "--json", demo)
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSpace(out), "\n")
	if len(lines) != 44 {
		t.Fatalf("%d lines, want one per demo example", len(lines))
	}
	for _, l := range lines {
		var p map[string]any
		if err := json.Unmarshal([]byte(l), &p); err != nil || len(p) != 8 {
			t.Fatalf("line %q: %v", l, err)
		}
		if p["chars_after"].(float64) >= p["chars_before"].(float64) || p["tokens_after"].(float64) <= 0 || p["dialect"] != "sqlite" {
			t.Errorf("sizes %v: grouping the 14 event tables must shrink the prompt", p)
		}
	}
}

// TestSolveWritesSubmissionAndReport runs the agent over part of the demo
// with the in-process simulator and checks the outputs score the same with
// quorum eval as the run reported.
func TestSolveWritesSubmissionAndReport(t *testing.T) {
	t.Parallel()
	out := t.TempDir()
	log, err := run(t, "solve", "--dataset", demo, "--ids", "local001,local005,local018,local026", "--out", out, "--votes", "4")
	if err != nil {
		t.Fatalf("%v\n%s", err, log)
	}
	if !strings.Contains(log, "SIMULATED LLM") {
		t.Errorf("the run does not say it used the simulator:\n%s", log)
	}
	rep, err := outputs.ReadReport(out)
	if err != nil {
		t.Fatal(err)
	}
	if len(rep.Examples) != 4 || rep.Totals.Scored != 4 {
		t.Fatalf("run.json: %+v", rep)
	}
	answered := 0
	for _, e := range rep.Examples {
		if e.Cost.LLMCalls < 4 {
			t.Errorf("%s: %d LLM calls for 4 candidates", e.InstanceID, e.Cost.LLMCalls)
		}
		if e.Status == "answered" {
			answered++
			if _, err := os.Stat(filepath.Join(out, e.InstanceID+".sql")); err != nil {
				t.Error(err)
			}
		}
	}
	ev, err := run(t, "eval", "--json", "--gold", filepath.Join(demo, "evaluation_suite", "gold"), "--pred", out)
	if err != nil {
		t.Fatal(err)
	}
	var score struct {
		Correct int `json:"correct"`
		Total   int `json:"total"`
	}
	json.Unmarshal([]byte(ev), &score)
	if score.Total != answered || score.Correct != rep.Totals.Correct {
		t.Errorf("quorum eval says %d/%d, the run said %d correct of %d answered", score.Correct, score.Total, rep.Totals.Correct, answered)
	}
}

func TestInspectShowPromptPerDialect(t *testing.T) {
	t.Parallel()
	out, err := run(t, "inspect", demo, "--show-prompt", "local022")
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"===== local022 (sqlite, database shop)", "Table full name: customers", "# Gross margin", "Task: What is the gross margin", "in SQLite dialect"} {
		if !strings.Contains(out, want) {
			t.Errorf("prompt lacks %q", want)
		}
	}
	subset := "../../../shared/data/spider2-lite-subset"
	if _, err := os.Stat(subset); err != nil {
		t.Skipf("shared subset missing: %v", err)
	}
	out, err = run(t, "inspect", subset, "--show-prompt", "bq011,sf_bq117")
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"(bigquery, database ga4)", "in BigQuery dialect", "_TABLE_SUFFIX", "(snowflake, database NOAA_DATA)", "Table full name: NOAA_DATA.NOAA_GSOD.", "in Snowflake dialect", "NULLS LAST"} {
		if !strings.Contains(out, want) {
			t.Errorf("prompts lack %q", want)
		}
	}
}

func TestBenchJSON(t *testing.T) {
	t.Parallel()
	out, err := run(t, "bench", "--json", "--dataset", demo, "--examples", "6", "--votes", "2", "--rpm", "600", "--ttft", "0s", "--tps", "0",
		"--no-scaling", "--trace", "summary", "--out", t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	// Progress goes to stderr (the same buffer here); the JSON is the last line.
	lines := strings.Split(strings.TrimSpace(out), "\n")
	var rep map[string]any
	if err := json.Unmarshal([]byte(lines[len(lines)-1]), &rep); err != nil {
		t.Fatalf("--json output: %v\n%s", err, out)
	}
	for _, k := range []string{"quota_ratio", "rate_limited_responses", "failed_examples", "examples", "candidates", "wall_seconds"} {
		if _, ok := rep[k]; !ok {
			t.Errorf("bench JSON lacks %s", k)
		}
	}
	if rep["examples"].(float64) != 6 || rep["failed_examples"].(float64) != 0 {
		t.Errorf("examples %v failed %v", rep["examples"], rep["failed_examples"])
	}
	// One --trace level is the run's (it was ignored: only two or more,
	// a comparison, were read).
	if sc, _ := rep["scenario"].(map[string]any); sc["trace"] != "summary" {
		t.Errorf("--trace summary: the scenario ran with trace %v", sc["trace"])
	}
	if _, err := run(t, "bench", "--trace", "everything", "--examples", "2", "--no-scaling", "--out", t.TempDir()); err == nil || !strings.Contains(err.Error(), "everything") {
		t.Errorf("--trace everything: %v, want an error naming it", err)
	}
}

// TestBenchScaleJSON: --scale puts one point per size in bench.json and
// the --json line, and is refused beside --agents.
func TestBenchScaleJSON(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	out, err := run(t, "bench", "--json", "--dataset", demo, "--scale", "3,5", "--votes", "2", "--rpm", "600", "--ttft", "0s", "--tps", "0", "--out", dir)
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSpace(out), "\n")
	var rep struct {
		Examples int `json:"examples"`
		Series   []struct {
			Examples    int     `json:"examples"`
			OutsideWall float64 `json:"outside_wall_seconds"`
			PeakRSS     int64   `json:"peak_rss_bytes"`
		} `json:"scale_series"`
	}
	if err := json.Unmarshal([]byte(lines[len(lines)-1]), &rep); err != nil {
		t.Fatalf("--json output: %v\n%s", err, out)
	}
	if rep.Examples != 3 || len(rep.Series) != 2 || rep.Series[0].Examples != 3 || rep.Series[1].Examples != 5 {
		t.Fatalf("--scale 3,5: report of %d examples, series %+v", rep.Examples, rep.Series)
	}
	for _, p := range rep.Series {
		if p.OutsideWall <= 0 || p.PeakRSS <= 0 {
			t.Errorf("%d examples: outside the wall %.2fs, peak RSS %d", p.Examples, p.OutsideWall, p.PeakRSS)
		}
	}
	if b, err := os.ReadFile(filepath.Join(dir, "bench.json")); err != nil || !strings.Contains(string(b), "scale_series") {
		t.Errorf("bench.json lacks the series (%v)", err)
	}
	if _, err := run(t, "bench", "--scale", "3", "--agents", "reforce,pexa", "--out", t.TempDir()); err == nil || !strings.Contains(err.Error(), "--scale") {
		t.Errorf("--scale with --agents: %v", err)
	}
}

// TestUnknownAgentFailsAtOnce: a misspelt --agent or option is refused
// before anything starts, naming what there is.
func TestUnknownAgentFailsAtOnce(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct {
		args []string
		want string
	}{
		{[]string{"run", "--dataset", demo, "--agent", "nosuch"}, `unknown agent "nosuch": the agents are ensemble, pexa, raise, reforce`},
		{[]string{"solve", "--dataset", demo, "--agent", "nosuch"}, `unknown agent "nosuch"`},
		{[]string{"bench", "--agent", "nosuch", "--examples", "1"}, `unknown agent "nosuch"`},
		{[]string{"coordinator", "--dataset", demo, "--agent", "nosuch"}, `unknown agent "nosuch"`},
		{[]string{"run", "--dataset", demo, "--agent-option", "frobnicate=1"}, `agent reforce has no option "frobnicate" (its options: votes, no-exploration`},
		{[]string{"run", "--dataset", demo, "--agent-option", "no-exploration=maybe"}, `option no-exploration="maybe": want true or false`},
		{[]string{"run", "--dataset", demo, "--agent-option", "noequals"}, `--agent-option "noequals": use NAME=VALUE`},
	} {
		out, err := run(t, tt.args...)
		if err == nil || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("quorum %s: error %v, want it to contain %q\n%s", strings.Join(tt.args, " "), err, tt.want, out)
		}
	}
}

func TestAgentsListsKindsPoolsAndOptions(t *testing.T) {
	t.Parallel()
	out, err := run(t, "agents")
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"reforce (default)", "link", "generate", "explore", "format-restriction", "link-budget"} {
		if !strings.Contains(out, want) {
			t.Errorf("quorum agents does not mention %q:\n%s", want, out)
		}
	}
	out, err = run(t, "agents", "--json")
	if err != nil {
		t.Fatal(err)
	}
	type listed struct {
		Name  string `json:"name"`
		Kinds []struct{ Name, Pool string }
	}
	var list []listed
	if err := json.Unmarshal([]byte(out), &list); err != nil || len(list) < 2 {
		t.Fatalf("quorum agents --json: %v\n%s", err, out)
	}
	pools := map[string]string{}
	for _, a := range list {
		if a.Name == "pexa" {
			for _, k := range a.Kinds {
				pools["pexa."+k.Name] = k.Pool
			}
		}
	}
	if pools["pexa.plan"] != "generate" || pools["pexa.probe"] != "explore" || pools["pexa.propose"] != "generate" {
		t.Errorf("pexa kinds and pools %v", pools)
	}
	for _, k := range list[slices.IndexFunc(list, func(a listed) bool { return a.Name == "reforce" })].Kinds {
		pools[k.Name] = k.Pool
	}
	if pools["generate"] != "generate" || pools["explore"] != "explore" || pools["link"] != "generate" {
		t.Errorf("reforce kinds and pools %v", pools)
	}
}

// TestBadRunInputIsRefusedWithExit2: flag values that cannot run and an
// output folder that cannot be written are refused before anything
// starts, with exit status 2 and the flag named.
func TestBadRunInputIsRefusedWithExit2(t *testing.T) {
	t.Parallel()
	// A folder under a regular file cannot be created, even by root.
	file := filepath.Join(t.TempDir(), "file")
	if err := os.WriteFile(file, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	for _, tt := range []struct {
		args []string
		want string
	}{
		{[]string{"run", "--dataset", demo, "--votes", "0"}, "--votes 0: an example needs at least 1 candidate"},
		{[]string{"run", "--dataset", demo, "--round-timeout", "-1s"}, "--round-timeout -1s"},
		{[]string{"run", "--dataset", demo, "--llm-header-timeout", "-1s"}, "--llm-header-timeout -1s: must not be negative"},
		{[]string{"run", "--dataset", demo, "--llm-stall-timeout", "-2m"}, "--llm-stall-timeout -2m0s: must not be negative"},
		{[]string{"run", "--dataset", demo, "--max-in-flight", "-5"}, "--max-in-flight -5"},
		{[]string{"run", "--dataset", demo, "--votes", "many"}, `invalid argument "many" for "--votes"`},
		{[]string{"run"}, "--dataset is required"},
		{[]string{"run", "--dataset", demo, "--warehouses", "sqlit"}, `--warehouses: "sqlit" is not a configured warehouse (configured: sqlite`},
		{[]string{"coordinator", "--dataset", demo, "--votes", "0"}, "--votes 0"},
	} {
		out, err := run(t, tt.args...)
		if err == nil || !strings.Contains(err.Error(), tt.want) || exitCode(err) != exitUsage {
			t.Errorf("quorum %s: error %v (exit %d), want %q with exit 2\n%s", strings.Join(tt.args, " "), err, exitCode(err), tt.want, out)
		}
	}
	_, err := run(t, "run", "--dataset", demo, "--out", filepath.Join(file, "out"))
	if err == nil || !strings.Contains(err.Error(), "--out") || exitCode(err) != exitUsage {
		t.Errorf("unwritable --out: %v (exit %d)", err, exitCode(err))
	}
}

// TestUnreachableLLMFailsAtOnce: quorum run against an endpoint where
// nothing listens, or one that refuses the key, stops before any work,
// naming the endpoint, with exit status 2.
func TestUnreachableLLMFailsAtOnce(t *testing.T) {
	t.Parallel()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	dead := "http://" + l.Addr().String() + "/v1"
	l.Close()
	refusing := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		http.Error(w, `{"error":{"message":"Incorrect API key"}}`, http.StatusUnauthorized)
	}))
	defer refusing.Close()
	for _, tt := range []struct{ url, want string }{
		{dead, "is unreachable"},
		{refusing.URL + "/v1", "refused the API key (HTTP 401)"},
	} {
		out, err := run(t, "run", "--dataset", demo, "--llm-base-url", tt.url, "--llm-api-key", "k", "--out", filepath.Join(t.TempDir(), "out"))
		if err == nil || !strings.Contains(err.Error(), tt.want) || !strings.Contains(err.Error(), strings.TrimSuffix(strings.TrimPrefix(tt.url, "http://"), "/v1")) || exitCode(err) != exitUsage {
			t.Errorf("LLM at %s: %v (exit %d), want %q naming the endpoint, exit 2\n%s", tt.url, err, exitCode(err), tt.want, out)
		}
	}
}

// TestEvalCountsMissingPredictions: with 3 of the demo's predictions, EX
// over all gold examples counts the others wrong and names them.
func TestEvalCountsMissingPredictions(t *testing.T) {
	t.Parallel()
	gold := filepath.Join(demo, "evaluation_suite", "gold")
	pred := t.TempDir()
	for _, id := range []string{"local001", "local003", "local004"} {
		src := filepath.Join(gold, "exec_result", id+".csv")
		if _, err := os.Stat(src); err != nil {
			src = filepath.Join(gold, "exec_result", id+"_a.csv") // the first of its gold variants
		}
		b, err := os.ReadFile(src)
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(pred, id+".csv"), b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	out, err := run(t, "eval", "--gold", gold, "--pred", pred)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(out, "missing: 41 of 44 gold examples have no prediction (local002, local005,") ||
		!strings.Contains(out, "EX: 1.0000 (3 of 3 correct)") || !strings.Contains(out, "EX over all 44 gold examples, the missing scored wrong: 0.0682") {
		t.Errorf("eval of 3 of 44 predictions:\n%s", out)
	}
}

// TestRunRefusesDroppedTaskLines: a malformed or duplicated task line would
// be left out of a run silently; quorum run names each with file:line and
// exits 2, unless --skip-invalid.
func TestRunRefusesDroppedTaskLines(t *testing.T) {
	t.Parallel()
	root := t.TempDir()
	abs, _ := filepath.Abs(filepath.Join(demo, "resource"))
	if err := os.Symlink(abs, filepath.Join(root, "resource")); err != nil {
		t.Fatal(err)
	}
	lines, err := os.ReadFile(filepath.Join(demo, "demo.jsonl"))
	if err != nil {
		t.Fatal(err)
	}
	first := strings.SplitN(string(lines), "\n", 2)[0]
	os.WriteFile(filepath.Join(root, "t.jsonl"), []byte(first+"\nnot json\n"+first+"\n"), 0o644)
	out, err := run(t, "run", "--dataset", root, "--out", filepath.Join(t.TempDir(), "out"))
	if err == nil || exitCode(err) != exitUsage || !strings.Contains(err.Error(), "t.jsonl:2: malformed JSON line") ||
		!strings.Contains(err.Error(), "t.jsonl:3: local001: duplicate instance_id (first on line 1)") || !strings.Contains(err.Error(), "--skip-invalid") {
		t.Errorf("run over bad task lines: %v (exit %d)\n%s", err, exitCode(err), out)
	}
}
