//go:build linux

package cli

import (
	"bytes"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// TestEvalHostilePredictionsAreBounded scores predictions built to exhaust
// the evaluator (a 1 GB blob, an endless cross join, 800 MB of hex, an
// endless recursive CTE, a count that never ends) with the quorum binary on
// the demo database: each scores 0 with an error saying which cap ended
// it (the count that never ends: the --query-timeout, "ran longer than
// 2s"), and the process stays under 1 GiB. Before the limits, four of them
// took 33 s and 6 GB. The wall time is logged, not asserted: the recorded
// reasons say no query ran past its cap.
func TestEvalHostilePredictionsAreBounded(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the quorum binary and runs queries until their timeout")
	}
	t.Parallel()
	bin := quorumBinary(t)
	const timeout = 2 * time.Second
	// order_items is the demo's largest table (4460 rows): its 4-way cross
	// join has 4×10^14 rows.
	const cross = "order_items a, order_items b, order_items c, order_items d"
	preds := []struct {
		id, sql string
		want    []string // the error holds one of these
	}{
		{"local001", "SELECT zeroblob(1000000000)", []string{"string or blob too big"}},
		{"local002", "SELECT * FROM " + cross, []string{"result too large", "interrupted"}},
		{"local003", "SELECT length(hex(randomblob(400000000))), length(hex(randomblob(400000000)))", []string{"string or blob too big"}},
		{"local004", "WITH RECURSIVE c(x) AS (SELECT 1 UNION ALL SELECT x+1 FROM c) SELECT x FROM c", []string{"result too large", "interrupted"}},
		// One row, never ready: only --query-timeout stops it.
		{"local005", "SELECT count(*) FROM " + cross, []string{"interrupted: the query ran longer than 2s"}},
	}
	pred := t.TempDir()
	for _, p := range preds {
		if err := os.WriteFile(filepath.Join(pred, p.id+".sql"), []byte(p.sql+"\n"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	gold := filepath.Join(demo, "evaluation_suite", "gold")
	cmd := exec.Command(bin, "eval", "--mode", "sql", "--json", "--query-timeout", timeout.String(),
		"--gold", gold, "--pred", pred, "--dataset", demo)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	start := time.Now()
	err := cmd.Run()
	wall := time.Since(start) //clock:ok logged, not asserted
	if cmd.ProcessState == nil {
		t.Fatalf("quorum eval did not run: %v", err)
	}
	maxRSS := cmd.ProcessState.SysUsage().(*syscall.Rusage).Maxrss // KiB on Linux
	t.Logf("quorum eval of %d hostile predictions: wall %v, peak RSS %d KiB (%.0f MiB)", len(preds), wall.Round(time.Millisecond), maxRSS, float64(maxRSS)/1024)
	// eval exits 0 once it has scored every prediction, right or wrong.
	if err != nil {
		t.Fatalf("quorum eval: %v (exit %d)\n%s", err, cmd.ProcessState.ExitCode(), stderr.String())
	}
	var rep struct {
		Instances []struct {
			InstanceID string `json:"instance_id"`
			Score      int    `json:"score"`
			Error      string `json:"error"`
		} `json:"instances"`
		Total int `json:"total"`
	}
	if err := json.Unmarshal(stdout.Bytes(), &rep); err != nil {
		t.Fatalf("--json output: %v\n%s", err, stdout.String())
	}
	if rep.Total != len(preds) || len(rep.Instances) != len(preds) {
		t.Fatalf("scored %d instances, want %d: %s", rep.Total, len(preds), stdout.String())
	}
	for i, p := range preds {
		s := rep.Instances[i]
		if s.InstanceID != p.id || s.Score != 0 || !containsAny(s.Error, p.want) {
			t.Errorf("%s (%s): score %d error %q, want 0 and one of %q", p.id, p.sql, s.Score, s.Error, p.want)
		}
	}
	if maxRSS >= 1<<20 {
		t.Errorf("peak RSS %d KiB, want under 1 GiB", maxRSS)
	}
}

// TestEvalQueryTimeoutFlag: --query-timeout must be a positive duration
// (a usage error, exit 2, otherwise), and applies to BIRD's metric when
// given.
func TestEvalQueryTimeoutFlag(t *testing.T) {
	t.Parallel()
	gold := filepath.Join(demo, "evaluation_suite", "gold")
	tests := []struct{ value, want string }{
		{"0s", "--query-timeout 0s: must be positive"},
		{"-5s", "--query-timeout -5s: must be positive"},
		{"soon", `invalid argument "soon" for "--query-timeout" flag`},
	}
	for _, tt := range tests {
		_, err := run(t, "eval", "--mode", "sql", "--gold", gold, "--pred", t.TempDir(), "--dataset", demo, "--query-timeout", tt.value)
		if err == nil || !strings.Contains(err.Error(), tt.want) || exitCode(err) != exitUsage {
			t.Errorf("--query-timeout %s: err = %v (exit %d), want %q and exit %d", tt.value, err, exitCode(err), tt.want, exitUsage)
		}
	}

	endless := writePreds(t, map[string]string{"dev_0": "WITH RECURSIVE c(x) AS (SELECT 1 UNION ALL SELECT x+1 FROM c) SELECT count(*) FROM c"})
	out, err := run(t, "eval", "--metric", "bird", "--mode", "sql", "--dataset", birdMini, "--pred", endless, "--query-timeout", "1s")
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(out, "dev_0     0      interrupted: the query ran longer than 1s") {
		t.Errorf("BIRD with --query-timeout 1s:\n%s", out)
	}
}
