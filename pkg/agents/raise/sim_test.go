package raise

import (
	"context"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"

	"github.com/quorumsql/quorum/pkg/agents/dbinfo"
	"github.com/quorumsql/quorum/pkg/cost"
	"github.com/quorumsql/quorum/pkg/dataset"
	"github.com/quorumsql/quorum/pkg/llm"
	"github.com/quorumsql/quorum/pkg/llmsim"
	"github.com/quorumsql/quorum/pkg/warehouse/sqlite"
)

// segmentLog records each agent segment's end and the prefix the next
// request continued.
type segmentLog struct {
	llm.Client
	mu       sync.Mutex
	finishes []string
	tokens   []int
	prefixes []string
}

func (s *segmentLog) Chat(ctx context.Context, req llm.Request) (*llm.Response, error) {
	s.mu.Lock()
	s.prefixes = append(s.prefixes, req.Messages[len(req.Messages)-1].Content)
	s.mu.Unlock()
	resp, err := s.Client.Chat(ctx, req)
	if err == nil {
		s.mu.Lock()
		s.finishes, s.tokens = append(s.finishes, resp.FinishReason), append(s.tokens, resp.Usage.CompletionTokens)
		s.mu.Unlock()
	}
	return resp, err
}

// TestTrajectoryThroughTheSimulator drives trajectories through HTTP to
// llmsim with a model that rambles before every command: each segment cut
// at 1,400 tokens is followed by exactly one nudge (ten rambles spend the
// 10,000 tokens), the command written
// after it runs, the nudge's own "[RUN] run_query(...)" never does; with a
// 3,000-token budget the trajectory stops once it is spent.
func TestTrajectoryThroughTheSimulator(t *testing.T) {
	t.Parallel()
	ds, err := dataset.Load("../../../examples/demo", dataset.Options{})
	if err != nil {
		t.Fatal(err)
	}
	noise := llmsim.DefaultNoise()
	noise.Ramble = 1
	sim, err := llmsim.New(llmsim.Config{Dataset: ds, Seed: 4, Noise: noise})
	if err != nil {
		t.Fatal(err)
	}
	ts := httptest.NewServer(sim)
	t.Cleanup(ts.Close)
	client, err := llm.New(llm.Config{BaseURL: ts.URL + "/v1", APIKey: "x", Default: llm.ModelConfig{Name: "r1"}})
	if err != nil {
		t.Fatal(err)
	}
	set := &sqlite.Set{}
	t.Cleanup(func() { set.Close() })
	whs := &dataset.Warehouses{DS: ds, SQLite: set}
	for _, id := range []string{"local001", "local010"} {
		e, _ := ds.Example(id)
		wh, err := whs.For(e)
		if err != nil {
			t.Fatal(err)
		}
		info, err := dbinfo.ForExample(context.Background(), ds, e, whs, dbinfo.DefaultOptions())
		if err != nil {
			t.Fatal(err)
		}
		seg := &segmentLog{Client: client}
		s := &Steps{cfg: DefaultConfig(), llm: seg}
		tr, err := s.Run(context.Background(), &Tools{Info: info, WH: wh, Cost: &cost.Cost{}}, e.Dialect, e.Question, e.ExternalKnowledge,
			func(i int) int64 { return int64(100 + i) }, &cost.Cost{})
		if err != nil {
			t.Fatal(err)
		}
		lengths := 0
		for i, f := range seg.finishes {
			if f != "length" {
				continue
			}
			lengths++
			if seg.tokens[i] != 1400 {
				t.Errorf("%s: a segment cut at %d tokens, not 1,400", id, seg.tokens[i])
			}
			if i+1 < len(seg.prefixes) && !strings.HasSuffix(seg.prefixes[i+1], "\n"+Nudge+"\n") {
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
