package cli

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"math"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/quorumsql/quorum/internal/runtime/runstate"
	"github.com/quorumsql/quorum/internal/testutil/redistest"
	"github.com/quorumsql/quorum/internal/testutil/tier"
	"github.com/quorumsql/quorum/internal/testutil/wait"
	"github.com/quorumsql/quorum/pkg/dataset"
	"github.com/quorumsql/quorum/pkg/llmsim"
	"github.com/quorumsql/quorum/pkg/outputs"
)

// TestRunResumedTwiceReportsEveryLatency (issue 54): quorum run
// interrupted twice and resumed reports every example's latency within
// 1 % of its recorded span (its final's recorded end less its
// publication, in Redis), none 0, and the wall time as the sum of its
// three sessions, which between them finished every example; run.json,
// report.html and the printed summary say so. Redis is the test's own, so
// the recorded spans can be read beside the report.
func TestRunResumedTwiceReportsEveryLatency(t *testing.T) {
	if testing.Short() {
		t.Skip("runs the demo three times")
	}
	tier.Servers(t, "quorum run (NATS, redis-server)")
	redisSrv := redistest.Start(t)
	state := runstate.New(redisSrv.Client(t))
	ds, err := dataset.Load(demo, dataset.Options{})
	if err != nil {
		t.Fatal(err)
	}
	sim, err := llmsim.New(llmsim.Config{Dataset: ds, Seed: 3, Latency: llmsim.Latency{FirstToken: 40 * time.Millisecond}})
	if err != nil {
		t.Fatal(err)
	}
	ts := httptest.NewServer(sim)
	defer ts.Close()
	const runID, examples = "resumed-timing", 12
	out := filepath.Join(t.TempDir(), "out")
	// An admission window of 2 leaves most examples unstarted at each
	// interruption; --ack-wait brings the interrupted sessions' tasks back
	// to the next soon.
	args := []string{"run", "--dataset", demo, "--limit", fmt.Sprint(examples), "--run-id", runID, "--out", out,
		"--llm-base-url", ts.URL + "/v1", "--llm-api-key", "test", "--votes", "4", "--max-in-flight", "2", "--log-level", "error",
		"--ack-wait", "5s", "--redis-url", redisSrv.URL()}
	finals := func() int {
		f, err := state.Finals(context.Background(), runID)
		if err != nil {
			t.Errorf("reading the run's finals: %v", err)
			return 0
		}
		return len(f)
	}

	for _, after := range []int{3, 7} {
		ctx, cancel := context.WithCancel(context.Background())
		cmd := NewRootCmd()
		var buf bytes.Buffer
		cmd.SetOut(&buf)
		cmd.SetErr(&buf)
		cmd.SetArgs(args)
		go func() {
			// Interrupted once this many finals are recorded (or after the
			// wait's bound: the checks below then say what went wrong).
			wait.Until(5*time.Minute, func() bool { return finals() >= after })
			cancel()
		}()
		err := cmd.ExecuteContext(ctx)
		cancel()
		var ee *exitError
		if !errors.As(err, &ee) || ee.code != exitAborted || !strings.Contains(err.Error(), "interrupted with") {
			t.Fatalf("session interrupted after %d finals ended with %v, want exit status 3 and the resume hint\n%s", after, err, buf.String())
		}
		if n := finals(); n < after || n >= examples {
			t.Fatalf("the session interrupted after %d finals left %d of %d: want some, not all", after, n, examples)
		}
	}
	known := finals()
	log, err := run(t, args...)
	if err != nil || !strings.Contains(log, "Resuming run "+runID) {
		t.Fatalf("resume: %v\n%s", err, log)
	}
	// The resume says what is done before its first final comes.
	if want := fmt.Sprintf("Resumed: %d of %d examples already final", known, examples); !strings.Contains(log, want) {
		t.Errorf("the resume's output does not say %q:\n%s", want, log)
	}

	rep, err := outputs.ReadReport(out)
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	rec, err := state.RecordedFinals(ctx, runID)
	if err != nil {
		t.Fatal(err)
	}
	var ids []string
	for _, e := range rep.Examples {
		ids = append(ids, e.InstanceID)
	}
	metas, err := state.Metas(ctx, runID, ids)
	if err != nil {
		t.Fatal(err)
	}
	if len(rep.Examples) != examples {
		t.Fatalf("run.json has %d examples, want %d", len(rep.Examples), examples)
	}
	for _, e := range rep.Examples {
		r, meta := rec[e.InstanceID], metas[e.InstanceID]
		if r == nil || meta == nil || r.At.IsZero() {
			t.Errorf("%s: recorded final %+v, meta %+v: want both, the final with its time", e.InstanceID, r, meta)
			continue
		}
		//clock:ok recorded timestamps (Redis), compared with the report built from them; no elapsed time asserted
		span := r.At.Sub(meta.Published).Seconds()
		if e.LatencySeconds <= 0 || math.Abs(e.LatencySeconds-span) > 0.01*span {
			t.Errorf("%s (finished in session %d): latency %v s, want its recorded span %v s (end %v − published %v)",
				e.InstanceID, r.Session, e.LatencySeconds, span, r.At, meta.Published)
		}
	}

	if len(rep.Sessions) != 3 {
		t.Fatalf("run.json has %d sessions, want 3: %+v", len(rep.Sessions), rep.Sessions)
	}
	wall, finished := 0.0, 0
	for _, s := range rep.Sessions {
		wall += s.Seconds
		finished += s.Examples
	}
	if finished != examples {
		t.Errorf("the sessions %+v finished %d examples between them, want %d", rep.Sessions, finished, examples)
	}
	//clock:ok the report's own recorded times, compared with its totals; no elapsed time asserted
	if rep.Totals.WallSeconds != wall || rep.Totals.SpanSeconds != rep.Finished.Sub(rep.Started).Seconds() ||
		!rep.Started.Equal(rep.Sessions[0].Started) || !rep.Finished.Equal(rep.Sessions[2].Finished) {
		t.Errorf("wall %v s, span %v s from %v to %v; want the sessions' sum %v s, and the span from the first's start %v to the last's end %v",
			rep.Totals.WallSeconds, rep.Totals.SpanSeconds, rep.Started, rep.Finished, wall, rep.Sessions[0].Started, rep.Sessions[2].Finished)
	}
	if want := fmt.Sprintf("examples: %d (answered", examples); !strings.Contains(strings.ToLower(log), want) ||
		!strings.Contains(log, fmt.Sprintf(") in %.1fs", wall)) {
		t.Errorf("the summary does not give the wall time as the sessions' sum, %.1fs:\n%s", wall, log)
	}
	page, err := os.ReadFile(filepath.Join(out, "report.html"))
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{`<section id="sessions"><h2>Sessions (3)</h2>`, "wall time (sum of its 3 sessions)", "span (first start to last end"} {
		if !strings.Contains(string(page), want) {
			t.Errorf("report.html lacks %q", want)
		}
	}
}
