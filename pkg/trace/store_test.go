package trace_test

import (
	"bytes"
	"context"
	"strings"
	"testing"
	"time"

	"github.com/quorumsql/quorum/internal/blob"
	"github.com/quorumsql/quorum/internal/rdb"
	"github.com/quorumsql/quorum/internal/runtime/runstate"
	"github.com/quorumsql/quorum/internal/testutil/redistest"
	"github.com/quorumsql/quorum/pkg/llm"
	"github.com/quorumsql/quorum/pkg/trace"
)

// task is a task entry whose call sends prompt and gets reply.
func task(id string, at time.Time, prompt, reply string) *trace.Entry {
	return &trace.Entry{Type: trace.TypeTask, At: at, End: at.Add(time.Second), Task: &trace.Task{Kind: "generate", ID: id, Outcome: "done",
		Steps: []trace.Step{{At: at, Seconds: 0.5, LLM: &trace.Call{Role: "generate", Model: "m",
			Messages: []trace.Message{{Role: "user", Content: trace.T(prompt)}}, Text: trace.T(reply),
			Usage: llm.Usage{PromptTokens: 100, CompletionTokens: 10}}}}}}
}

// TestStoreKeepsLongTextsOnce writes the traces of two candidates sharing
// a long prompt through a real Redis: the prompt is one blob, the entries
// read back in time order with their texts, and a text Redis lost reads
// as such instead of losing the trace.
func TestStoreKeepsLongTextsOnce(t *testing.T) {
	ctx := context.Background()
	c := redistest.Start(t).Client(t)
	st := &trace.Store{Lists: runstate.New(c), Blobs: blob.New(c, 0)}
	prompt := strings.Repeat("the schema of every table ", 100) // well over Inline
	t0 := time.Now()
	// Written out of order: the later task first.
	if err := st.Write(ctx, "r1", "ex1", task("c1", t0.Add(time.Second), prompt, "short reply")); err != nil {
		t.Fatal(err)
	}
	if err := st.Write(ctx, "r1", "ex1", task("c0", t0, prompt, strings.Repeat("a long reply ", 40))); err != nil {
		t.Fatal(err)
	}
	keys, err := c.Keys(ctx, rdb.BlobKey("*")).Result()
	if err != nil {
		t.Fatal(err)
	}
	if len(keys) != 2 { // the prompt once, the long reply; the short reply inline
		t.Errorf("%d blobs stored, want 2 (the shared prompt once and the long reply): %v", len(keys), keys)
	}
	raw, err := c.LRange(ctx, rdb.TraceKey("r1", "ex1"), 0, -1).Result()
	if err != nil || len(raw) != 2 || strings.Contains(raw[0], "the schema of every table") {
		t.Errorf("the trace list holds %d entries (err %v); the prompt must be a reference, not inline: %.200s", len(raw), err, raw)
	}
	x, err := st.Export(ctx, "r1", "ex1")
	if err != nil {
		t.Fatal(err)
	}
	x.Resolve()
	if len(x.Entries) != 2 || x.Entries[0].Task.ID != "c0" || x.Entries[1].Task.ID != "c1" {
		t.Fatalf("entries not in time order: %+v", x.Entries)
	}
	for _, e := range x.Entries {
		if got := e.Task.Steps[0].LLM.Messages[0].Content.S; got != prompt {
			t.Errorf("%s: prompt read back as %.60q…, want the prompt written", e.Task.ID, got)
		}
	}
	if got := x.Entries[1].Task.Steps[0].LLM.Text.S; got != "short reply" {
		t.Errorf("inline reply read back as %q", got)
	}
	// Redis loses the prompt's blob: the trace still reads, saying so.
	if err := c.Del(ctx, rdb.BlobKey(blob.Ref([]byte(prompt)))).Err(); err != nil {
		t.Fatal(err)
	}
	entries, err := st.Read(ctx, "r1", "ex1", true)
	if err != nil {
		t.Fatalf("a trace with a lost text: %v", err)
	}
	if got := entries[0].Task.Steps[0].LLM.Messages[0].Content.S; got != trace.Lost {
		t.Errorf("a lost text reads %.60q, want %q", got, trace.Lost)
	}
	if got := entries[0].Task.Steps[0].LLM.Text.S; !strings.HasPrefix(got, "a long reply") {
		t.Errorf("the reply still stored reads %.60q", got)
	}
	var out bytes.Buffer
	if err := trace.Render(&out, &trace.Export{Run: "r1", Example: "ex1", Entries: entries}, trace.RenderOptions{}); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(out.String(), "task generate c0") || !strings.Contains(out.String(), "llm generate m: 100→10 tokens") {
		t.Errorf("the tree:\n%s", out.String())
	}
}

func TestParseLevel(t *testing.T) {
	for _, tt := range []struct {
		in   string
		want trace.Level
		err  bool
	}{{"none", trace.None, false}, {"summary", trace.Summary, false}, {"full", trace.Full, false}, {"", trace.None, true}, {"all", trace.None, true}} {
		got, err := trace.ParseLevel(tt.in)
		if got != tt.want || (err != nil) != tt.err {
			t.Errorf("ParseLevel(%q) = %v, %v; want %v, error %v", tt.in, got, err, tt.want, tt.err)
		}
	}
}
