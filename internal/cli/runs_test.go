package cli

import (
	"context"
	"encoding/json"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/spf13/cobra"

	"github.com/quorumsql/quorum/internal/queue"
	"github.com/quorumsql/quorum/internal/runtime/message"
	"github.com/quorumsql/quorum/internal/runtime/runstate"
	"github.com/quorumsql/quorum/internal/testutil/natstest"
	"github.com/quorumsql/quorum/internal/testutil/redistest"
)

// TestRunsListAndDelete: quorum runs lists a finished run (its expiry), an
// unfinished one (none) and hides question runs unless asked; delete
// refuses the unfinished run without --force, and removes a run's keys
// and, with --nats-url, its queued messages, leaving the others'.
func TestRunsListAndDelete(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	srv := redistest.Start(t)
	rdb := srv.Client(t)
	st := runstate.New(rdb)
	natsURL := natstest.Start(t).URL()
	q, err := queue.Connect(ctx, natsURL, queue.Config{})
	if err != nil {
		t.Fatal(err)
	}
	defer q.Close()
	created := time.Date(2026, 11, 26, 11, 52, 0, 0, time.UTC)
	for _, r := range []struct {
		run         string
		examples    []string
		final       int
		interactive bool
	}{
		{"done1", []string{"a"}, 1, false}, {"wip", []string{"a", "b"}, 1, false}, {"qabc", []string{"q1"}, 1, true},
	} {
		m := &runstate.Manifest{Run: r.run, Examples: r.examples, Agent: "reforce", Created: created, Interactive: r.interactive}
		if _, _, err := st.CreateManifest(ctx, m); err != nil {
			t.Fatal(err)
		}
		for _, ex := range r.examples {
			if err := st.MarkDone(ctx, r.run, ex, "reforce", "r0.generate.0"); err != nil {
				t.Fatal(err)
			}
		}
		for _, ex := range r.examples[:r.final] {
			if err := st.SetFinal(ctx, &message.FinalAnswer{V: message.Version, Run: r.run, Example: ex, Status: "answered"}); err != nil {
				t.Fatal(err)
			}
		}
		if r.final == len(r.examples) {
			if _, err := st.Retire(ctx, r.run, runstate.Retention{State: time.Hour, Answers: 2 * time.Hour}); err != nil {
				t.Fatal(err)
			}
		}
		if err := q.Publish(ctx, queue.Subject(r.run, queue.StageGenerate, "sqlite"), r.run+".a", map[string]int{"v": queue.Version}); err != nil {
			t.Fatal(err)
		}
	}
	redisURL := "--redis-url=" + srv.URL()

	for _, tc := range []struct {
		name    string
		args    []string
		want    []string // in the output (or the error)
		wantErr bool
		keys    map[string]int // runs' keys left after the command
		msgs    map[string]uint64
	}{
		{name: "list", args: []string{"runs", "list", redisURL},
			want: []string{"done1  finished", "1/1", "2026-11-26 11:52", "59m, answers 1h59m", "wip    unfinished", "1/2", "never", "and 1 question runs (quorum serve) with 3 keys"}},
		{name: "no redis", args: []string{"runs", "list", "--redis-url="}, want: []string{"--redis-url is required"}, wantErr: true},
		{name: "unfinished refused", args: []string{"runs", "delete", "wip", redisURL},
			want: []string{"run wip is unfinished (1 of 2 examples final)", "--force"}, wantErr: true, keys: map[string]int{"wip": 4}},
		{name: "unknown run", args: []string{"runs", "delete", "nope", redisURL}, want: []string{"no such run: nope"}, wantErr: true},
		{name: "finished deleted with its messages", args: []string{"runs", "delete", "done1", redisURL, "--nats-url", natsURL},
			want: []string{"Deleted run done1 (finished): 3 keys, 1 queued messages."},
			keys: map[string]int{"done1": 0, "wip": 4, "qabc": 3}, msgs: map[string]uint64{"done1": 0, "wip": 1, "qabc": 1}},
		{name: "forced", args: []string{"runs", "delete", "wip", redisURL, "--force"},
			want: []string{"Deleted run wip (unfinished): 4 keys; its messages in NATS, if any, stay"}, keys: map[string]int{"wip": 0}},
	} {
		out, err := run(t, tc.args...)
		if err != nil {
			out += err.Error()
		}
		if (err != nil) != tc.wantErr {
			t.Errorf("%s: error %v, want error: %v\n%s", tc.name, err, tc.wantErr, out)
		}
		for _, w := range tc.want {
			if !strings.Contains(out, w) {
				t.Errorf("%s: output lacks %q:\n%s", tc.name, w, out)
			}
		}
		for r, want := range tc.keys {
			if keys, err := rdb.Keys(ctx, "quorum:run:"+r+":*").Result(); err != nil || len(keys) != want {
				t.Errorf("%s: run %s has keys %v (%v), want %d", tc.name, r, keys, err, want)
			}
		}
		for r, want := range tc.msgs {
			if n, err := q.RunMessages(ctx, r); err != nil || n != want {
				t.Errorf("%s: run %s has %d messages (%v), want %d", tc.name, r, n, err, want)
			}
		}
	}

	out, err := run(t, "runs", "list", "--json", "--questions", redisURL)
	if err != nil {
		t.Fatal(err)
	}
	var runs []runstate.RunInfo
	if err := json.Unmarshal([]byte(out), &runs); err != nil || len(runs) != 1 || runs[0].Run != "qabc" || !runs[0].Interactive ||
		runs[0].Status != runstate.StatusFinished || runs[0].Persistent != 0 || runs[0].MaxTTL <= time.Hour {
		t.Errorf("--json --questions: %+v (%v)\n%s", runs, err, out)
	}
}

func TestRetainDurations(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		in   string
		want time.Duration
	}{
		{"7d", 7 * 24 * time.Hour}, {"1d12h", 36 * time.Hour}, {"36h", 36 * time.Hour}, {"90m", 90 * time.Minute},
		{"0", 0}, {"0d", 0}, {"-1d", 0}, {"7", 0}, {"d", 0}, {"week", 0},
	} {
		got, err := parseDays(tc.in)
		if (err != nil) != (tc.want == 0) || got != tc.want {
			t.Errorf("%q: %v, %v; want %v", tc.in, got, err, tc.want)
		}
	}
	if _, err := run(t, "run", "--retain", "0d"); err == nil || !strings.Contains(err.Error(), "positive") || exitCode(err) != exitUsage {
		t.Errorf("--retain 0d: %v", err)
	}
	f, err := parseServeFlags(false, "--retain", "2d")
	if err != nil || f.retain.retention() != (runstate.Retention{State: 48 * time.Hour, Answers: 48 * time.Hour}) {
		t.Errorf("serve --retain 2d: %+v, %v", f, err)
	}
	var rf runFlags
	cmd := &cobra.Command{Use: "coordinator"}
	rf.register(cmd)
	if err := cmd.Flags().Parse([]string{"--retain", "20d"}); err != nil || rf.retain.retention() != (runstate.Retention{State: 20 * 24 * time.Hour, Answers: 20 * 24 * time.Hour}) {
		t.Errorf("--retain 20d without --retain-answers: %+v, %v", rf.retain.retention(), err)
	}
}

// TestRunsOverAStateDir: quorum run without --redis-url keeps its Redis in
// its state folder; quorum runs reaches it there once the run has ended
// (starting a server over the folder's files for the command), lists the
// run, deletes it, and refuses a folder without Redis or both flags.
func TestRunsOverAStateDir(t *testing.T) {
	t.Parallel()
	out := filepath.Join(t.TempDir(), "out")
	if log, err := run(t, "run", "--dataset", demo, "--limit", "1", "--votes", "1", "--out", out, "--run-id", "kept", "--log-level", "error"); err != nil {
		t.Fatalf("quorum run: %v\n%s", err, log)
	}
	state := filepath.Join(out, ".state")
	for _, tc := range []struct {
		name    string
		args    []string
		want    string
		wantErr bool
	}{
		{"list", []string{"runs", "list", "--state-dir", state}, "kept  finished", false},
		{"delete", []string{"runs", "delete", "kept", "--state-dir", state}, "Deleted run kept (finished)", false},
		{"gone", []string{"runs", "list", "--state-dir", state}, "RUN", false},
		{"no redis there", []string{"runs", "list", "--state-dir", t.TempDir()}, "has no redis folder", true},
		{"both", []string{"runs", "list", "--state-dir", state, "--redis-url", "redis://127.0.0.1:1"}, "give one", true},
	} {
		log, err := run(t, tc.args...)
		if err != nil {
			log += err.Error()
		}
		if (err != nil) != tc.wantErr || !strings.Contains(log, tc.want) {
			t.Errorf("%s: %v: error %v (want one: %v), output lacks %q or has it:\n%s", tc.name, tc.args, err, tc.wantErr, tc.want, log)
		}
		if tc.name == "gone" && strings.Contains(log, "kept") {
			t.Errorf("after delete the run is still listed:\n%s", log)
		}
	}
}

// TestStreamReplicasNeedACluster: --stream-replicas reaches the streams; on
// quorum run's single embedded server, 3 replicas are refused before any
// work, saying what they need.
func TestStreamReplicasNeedACluster(t *testing.T) {
	t.Parallel()
	_, err := run(t, "run", "--dataset", demo, "--limit", "1", "--votes", "1", "--stream-replicas", "3", "--out", t.TempDir(), "--log-level", "error")
	if err == nil || !strings.Contains(err.Error(), "cluster of at least 3 servers") {
		t.Errorf("--stream-replicas 3 on one server: %v, want an error naming the cluster it needs", err)
	}
}
