package raise

import (
	"context"
	"strings"
	"testing"

	"github.com/quorumsql/quorum/pkg/agents/agenttest"
	"github.com/quorumsql/quorum/pkg/agents/dbinfo"
	"github.com/quorumsql/quorum/pkg/cost"
	"github.com/quorumsql/quorum/pkg/llmsim"
)

// TestTrajectoryThroughTheSimulator drives trajectories through HTTP to
// llmsim with a model that rambles before every command: each segment cut
// at 1,400 tokens is followed by exactly one nudge (ten rambles spend the
// 10,000 tokens), the command written
// after it runs, the nudge's own "[RUN] run_query(...)" never does; with a
// 3,000-token budget the trajectory stops once it is spent.
func TestTrajectoryThroughTheSimulator(t *testing.T) {
	t.Parallel()
	demo := agenttest.Demo(t)
	noise := llmsim.DefaultNoise()
	noise.Ramble = 1
	_, client := agenttest.Sim(t, llmsim.Config{Dataset: demo.Dataset, Seed: 4, Noise: noise}, "r1")
	for _, id := range []string{"local001", "local010"} {
		e, wh := demo.Example(t, id), demo.Warehouse(t, id)
		info, err := dbinfo.ForExample(context.Background(), demo.Dataset, e, demo.Warehouses, dbinfo.DefaultOptions())
		if err != nil {
			t.Fatal(err)
		}
		seg := agenttest.Record(client)
		s := &Steps{cfg: DefaultConfig(), llm: seg}
		tr, err := s.Run(context.Background(), &Tools{Info: info, WH: wh, Cost: &cost.Cost{}}, e.Dialect, e.Question, e.ExternalKnowledge,
			func(i int) int64 { return int64(100 + i) }, &cost.Cost{})
		if err != nil {
			t.Fatal(err)
		}
		lengths, asked := 0, seg.Asked()
		for i, r := range seg.Responses() {
			if r == nil || r.FinishReason != "length" {
				continue
			}
			lengths++
			if r.Usage.CompletionTokens != 1400 {
				t.Errorf("%s: a segment cut at %d tokens, not 1,400", id, r.Usage.CompletionTokens)
			}
			if i+1 < len(asked) && !strings.HasSuffix(asked[i+1], "\n"+Nudge+"\n") {
				t.Errorf("%s: the request after a cut segment does not end with the nudge", id)
			}
		}
		if lengths == 0 || tr.Nudges != lengths || (tr.End != EndAnswer && tr.End != EndTokens) || len(tr.Ops) < 4 {
			t.Errorf("%s: %d cut segments, %d nudges, %d commands, end %s", id, lengths, tr.Nudges, len(tr.Ops), tr.End)
		}
		for _, op := range tr.Ops {
			if strings.Contains(op.Command, "(...)") {
				t.Errorf("%s: the nudge's command was run: %s", id, op.Command)
			}
		}
		// A 3,000-token budget ends the trajectory after three cut segments.
		cfg := DefaultConfig()
		cfg.TotalTokens = 3000
		s = &Steps{cfg: cfg, llm: client}
		tr, err = s.Run(context.Background(), &Tools{Info: info, WH: wh, Cost: &cost.Cost{}}, e.Dialect, e.Question, e.ExternalKnowledge,
			func(i int) int64 { return int64(100 + i) }, &cost.Cost{})
		if err != nil || tr.End != EndTokens || tr.Tokens < 3000 || tr.Tokens >= 3000+1400 {
			t.Errorf("%s: with a 3,000-token budget: end %s after %d tokens (%v)", id, tr.End, tr.Tokens, err)
		}
	}
}

// TestSeamThroughTheSimulator runs the agent through the runtime's seam
// in process (agenttest.Run, as quorum solve does) against llmsim: each
// of two rounds' trajectory gives its four candidate slots (three finals
// and the column post-process) in one dispatch, one vote decides, and
// every call the simulator served is in the examples' ledgers.
func TestSeamThroughTheSimulator(t *testing.T) {
	t.Parallel()
	demo := agenttest.Demo(t).Only(t, "local001", "local002", "local010")
	sim, client := agenttest.Sim(t, llmsim.Config{Dataset: demo.Dataset, Seed: 2}, "r1")
	outs := agenttest.Run(t, Definition(), demo, agenttest.Options{LLM: client, Agent: map[string]string{OptRounds: "2"}, Seed: 1})
	calls := 0
	for id, o := range outs {
		calls += o.Cost.Total().LLMCalls
		if o.Decision.Winner == nil || o.Rounds != 1 || len(o.Candidates) != 2*4 {
			t.Errorf("%s: %d rounds, %d candidates, decision %+v", id, o.Rounds, len(o.Candidates), o.Decision)
		}
		t.Logf("%s: %d candidates, %s (%s), %d calls", id, len(o.Candidates), o.Decision.Method, o.Decision.Confidence, o.Cost.Total().LLMCalls)
	}
	if st := sim.Stats(); int64(calls) != st.Requests || st.Unknown != 0 {
		t.Errorf("%d calls in the ledgers, %d served, %d not recognised", calls, st.Requests, st.Unknown)
	}
}
