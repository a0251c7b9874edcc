package e2e

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/quorumsql/quorum/internal/testutil/jaegertest"
	"github.com/quorumsql/quorum/pkg/outputs"
	"github.com/quorumsql/quorum/pkg/trace"
)

// TestEveryExampleIsOneTraceInJaeger runs PExA over three demo examples
// with every role its own process exporting spans over OTLP to a real
// Jaeger, and reads back through Jaeger's query API that each example is
// one trace with spans from every role, whose LLM spans carry the GenAI
// attributes and add up to run.json's ledger; the trace quorum keeps in
// the output folder agrees with both.
func TestEveryExampleIsOneTraceInJaeger(t *testing.T) {
	j := jaegertest.Start(t)
	c := newCluster(t)
	otlp := []string{"--otlp-endpoint", j.OTLPEndpoint()}
	c.start("voter", "voter", otlp...)
	c.start("generator", "generator-worker", otlp...)
	c.start("explorer", "explorer-worker", otlp...)
	out := filepath.Join(t.TempDir(), "out")
	ids := []string{"local001", "local002", "local003"}
	coord := c.start("coordinator", "coordinator", append([]string{"--run-id", "traced", "--dataset", demoDir(t), "--agent", "pexa",
		"--seed", "3", "--out", out, "--ids", strings.Join(ids, ",")}, otlp...)...)
	wait(t, coord, c.logs, "coordinator", 3*time.Minute)

	var run struct {
		Examples []struct {
			ID   string `json:"instance_id"`
			Cost struct {
				Calls int `json:"llm_calls"`
				LLM   struct {
					Prompt     int `json:"prompt_tokens"`
					Completion int `json:"completion_tokens"`
				} `json:"llm"`
				Queries int `json:"warehouse_queries"`
			} `json:"cost"`
		} `json:"examples"`
	}
	b, err := os.ReadFile(filepath.Join(out, "run.json"))
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(b, &run); err != nil {
		t.Fatal(err)
	}
	if len(run.Examples) != len(ids) {
		t.Fatalf("run.json has %d examples, want %d", len(run.Examples), len(ids))
	}
	roles := []string{"quorum-coordinator", "quorum-explorer", "quorum-generator", "quorum-voter"}
	for _, ex := range run.Examples {
		tid, _ := trace.ExampleIDs("traced", ex.ID)
		calls := ex.Cost.Calls
		tr := j.WaitTrace(t, 90*time.Second, tid.String(), func(tr jaegertest.Trace) bool {
			return slices.Equal(tr.Services(), roles) && len(chats(tr)) >= calls && len(tr.Named("example "+ex.ID)) == 1
		})
		// One trace, rooted at the example: every other span descends
		// from the root through spans of the same trace.
		roots := 0
		for _, s := range tr.Spans {
			if s.Parent() == "" {
				roots++
				if s.OperationName != "example "+ex.ID {
					t.Errorf("%s: a root span %q; want only the example's", ex.ID, s.OperationName)
				}
			} else if _, ok := tr.Span(s.Parent()); !ok {
				t.Errorf("%s: span %q's parent %s is not in the trace", ex.ID, s.OperationName, s.Parent())
			}
		}
		if roots != 1 {
			t.Errorf("%s: %d root spans, want 1", ex.ID, roots)
		}
		var in, outTok int
		for _, s := range chats(tr) {
			for _, k := range []string{"gen_ai.operation.name", "gen_ai.provider.name", "gen_ai.request.model", "gen_ai.response.finish_reasons"} {
				if _, ok := s.Tag(k); !ok {
					t.Errorf("%s: LLM span %q has no %s", ex.ID, s.OperationName, k)
				}
			}
			in += tagInt(t, s, "gen_ai.usage.input_tokens")
			outTok += tagInt(t, s, "gen_ai.usage.output_tokens")
		}
		if got := len(chats(tr)); got != calls || in != ex.Cost.LLM.Prompt || outTok != ex.Cost.LLM.Completion {
			t.Errorf("%s: Jaeger has %d LLM spans with %d input and %d output tokens; run.json's ledger: %d calls, %d prompt and %d completion tokens",
				ex.ID, got, in, outTok, calls, ex.Cost.LLM.Prompt, ex.Cost.LLM.Completion)
		}
		if q := len(spansPrefixed(tr, "query ")); q != ex.Cost.Queries {
			t.Errorf("%s: Jaeger has %d query spans, run.json %d warehouse queries", ex.ID, q, ex.Cost.Queries)
		}
		// The trace quorum keeps itself says the same.
		raw, err := outputs.ReadTrace(out, ex.ID)
		if err != nil {
			t.Fatal(err)
		}
		var x trace.Export
		if err := json.Unmarshal(raw, &x); err != nil {
			t.Fatal(err)
		}
		kept, prompt := 0, 0
		for _, e := range x.Entries {
			if e.TraceID != "" && e.TraceID != tid.String() {
				t.Errorf("%s: a trace entry names OpenTelemetry trace %s, want %s", ex.ID, e.TraceID, tid)
			}
			if e.Task == nil {
				continue
			}
			for _, s := range e.Task.Steps {
				if s.LLM != nil {
					kept++
					prompt += s.LLM.Usage.PromptTokens
				}
			}
		}
		if kept != calls || prompt != ex.Cost.LLM.Prompt {
			t.Errorf("%s: traces/%s has %d LLM calls with %d prompt tokens; run.json %d calls, %d prompt tokens", ex.ID,
				outputs.TraceFile(ex.ID), kept, prompt, calls, ex.Cost.LLM.Prompt)
		}
	}
	if services, err := j.Services(context.Background()); err != nil || len(services) < len(roles) {
		t.Errorf("Jaeger's services: %v (%v), want %v", services, err, roles)
	}
}

func chats(tr jaegertest.Trace) []jaegertest.Span { return spansPrefixed(tr, "chat ") }

func spansPrefixed(tr jaegertest.Trace, prefix string) []jaegertest.Span {
	var out []jaegertest.Span
	for _, s := range tr.Spans {
		if strings.HasPrefix(s.OperationName, prefix) {
			out = append(out, s)
		}
	}
	return out
}

func tagInt(t *testing.T, s jaegertest.Span, key string) int {
	t.Helper()
	v, ok := s.Tag(key)
	if !ok {
		t.Errorf("span %q has no %s", s.OperationName, key)
		return 0
	}
	n, err := strconv.Atoi(v)
	if err != nil {
		t.Errorf("span %q: %s = %q, not an integer", s.OperationName, key, v)
	}
	return n
}
