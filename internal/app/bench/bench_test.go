package bench

import (
	"bytes"
	"context"
	"io"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/quorumsql/quorum/internal/testutil/tier"
	"github.com/quorumsql/quorum/pkg/dataset"
	"github.com/quorumsql/quorum/pkg/llm"
)

func TestMakeDataset(t *testing.T) {
	t.Parallel()
	dir, err := MakeDataset("../../../examples/demo", 50, filepath.Join(t.TempDir(), "ds"))
	if err != nil {
		t.Fatal(err)
	}
	ds, err := dataset.Load(dir, dataset.Options{})
	if err != nil {
		t.Fatal(err)
	}
	if len(ds.Examples) != 50 || len(ds.Problems) != 0 {
		t.Fatalf("%d examples, problems %v", len(ds.Examples), ds.Problems)
	}
	first, _ := ds.Example("localbench00000")
	copy, _ := ds.Example("localbench00044")
	if !strings.HasPrefix(copy.Question, first.Question) || copy.Question == first.Question || len(copy.Gold.Results) == 0 {
		t.Errorf("copy %q of %q, gold %v", copy.Question, first.Question, copy.Gold.Results)
	}
}

// TestBenchRunsThroughTheRealPieces runs a small limited scenario and two
// scaling points through embedded NATS, redis-server and llmsim.
func TestBenchRunsThroughTheRealPieces(t *testing.T) {
	tier.Servers(t, "a cluster")
	t.Parallel()
	sc := Standard()
	sc.Dataset = "../../../examples/demo"
	sc.Examples, sc.Votes, sc.RPM = 12, 4, 600
	sc.FirstTokenMS, sc.TokensPerSecond = 20, 0
	sc.Generators, sc.GeneratorConcurrency, sc.Explorers, sc.ExplorerConcurrency = 2, 4, 1, 4
	sc.Scaling, sc.ScalingExamples, sc.ScalingConcurrency = []int{1, 2}, 4, 2
	var progress bytes.Buffer
	rep, err := Run(context.Background(), sc, t.TempDir(), &progress)
	if err != nil {
		t.Fatal(err)
	}
	if rep.Examples != 12 || rep.Candidates < 48 || rep.FailedExamples != 0 || rep.LLMCalls == 0 {
		t.Fatalf("report %+v", rep)
	}
	// 429s depend on the machine keeping up with the limiter's pace (a
	// call it admitted can reach the simulator late, bunched with others):
	// logged here, asserted under make slow (slowRun), reported by make
	// bench.
	t.Logf("%d 429s, quota ratio %.3f", rep.RateLimited, rep.QuotaRatio)
	if slowRun() && rep.RateLimited != 0 {
		t.Errorf("%d 429s with the limiter set to the provider's quota", rep.RateLimited)
	}
	if rep.QuotaBound <= 0 || rep.QuotaRatio <= 0 || rep.QuotaRatio > 1.2 || rep.BindingLimit != "llm requests/min" {
		t.Errorf("quota bound %.1fs ratio %.2f (%s)", rep.QuotaBound, rep.QuotaRatio, rep.BindingLimit)
	}
	if rep.PerStage["generate"].LLMCalls <= 0 || rep.ChainP50 <= 0 || rep.LatencyP50 < rep.ChainP50/2 {
		t.Errorf("stages %v, chain p50 %.2f, latency p50 %.2f", rep.PerStage, rep.ChainP50, rep.LatencyP50)
	}
	// Time in service sits between one chain and the latency with queueing.
	if rep.ServiceP50 < rep.ChainP50*0.9 || rep.ServiceP50 > rep.LatencyP50+0.01 {
		t.Errorf("service p50 %.2f outside chain p50 %.2f .. latency p50 %.2f", rep.ServiceP50, rep.ChainP50, rep.LatencyP50)
	}
	checkRedis(t, rep.Redis, 1)
	if len(rep.Scaling) != 2 || rep.Scaling[0].CallsPerMinute <= 0 || rep.BindsAt+rep.BindsAtEstimate == 0 {
		t.Errorf("scaling %+v", rep.Scaling)
	}
	var html bytes.Buffer
	if err := WriteHTML(&html, rep.Run, rep); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"<svg", "Accuracy by dialect", "Throughput over time", "quota ratio", "SIMULATED LLM", "generator workers"} {
		if !strings.Contains(html.String(), want) {
			t.Errorf("report lacks %q", want)
		}
	}
}

// TestBenchLearnsAQuotaItWasToldWrong: the limiter is told twice the
// provider's quota, and another client shares it; the provider's stated
// limit reaches the limiter through the real pieces (llmsim over HTTP, the
// cluster, redis-server), the stranger's requests are served and kept out
// of the run's counts, and no example fails. The 429s and ratios depend on
// the machine keeping pace: logged here, measured by quorum bench.
func TestBenchLearnsAQuotaItWasToldWrong(t *testing.T) {
	tier.Servers(t, "a cluster")
	t.Parallel()
	sc := Standard()
	sc.Dataset = "../../../examples/demo"
	sc.Examples, sc.Votes, sc.RPM, sc.ToldRPM, sc.StrangerRPM = 8, 2, 600, 1200, 120
	sc.FirstTokenMS, sc.TokensPerSecond = 20, 0
	sc.Generators, sc.GeneratorConcurrency, sc.Explorers, sc.ExplorerConcurrency = 1, 4, 1, 4
	sc.Scaling = nil
	rep, err := Run(context.Background(), sc, t.TempDir(), io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("%d 429s (%.2f %%), quota ratio %.3f, stranger %+v", rep.RateLimited, 100*rep.RateLimitedShare, rep.QuotaRatio, rep.Stranger)
	if rep.FailedExamples != 0 || rep.StatedRPM != 600 {
		t.Errorf("failed %d, stated %.0f req/min; want 0 failed and the provider's 600 stated", rep.FailedExamples, rep.StatedRPM)
	}
	if st := rep.Stranger; st == nil || st.Served == 0 || st.DemandRPM != 120 || st.Failed != 0 {
		t.Errorf("the stranger: %+v, want some of its 120 req/min served and none failed", st)
	}
}

func TestLoadScenario(t *testing.T) {
	t.Parallel()
	p := filepath.Join(t.TempDir(), "s.yaml")
	os.WriteFile(p, []byte("name: small\nexamples: 10\nrpm: 100\nfirst_token_ms: 50\n"), 0o644)
	sc, err := LoadScenario(p)
	if err != nil || sc.Examples != 10 || sc.RPM != 100 || sc.FirstTokenMS != 50 || sc.Votes != 8 {
		t.Errorf("%+v %v", sc, err)
	}
	os.WriteFile(p, []byte("exmples: 10\n"), 0o644)
	if _, err := LoadScenario(p); err == nil {
		t.Error("a misspelt field was accepted")
	}
}

// The example scenario documents the standard one; they must not drift.
func TestExampleScenarioIsStandard(t *testing.T) {
	t.Parallel()
	sc, err := LoadScenario(filepath.Join("..", "..", "..", "examples", "bench", "spider2-size.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	if want := Standard(); !reflect.DeepEqual(sc, want) {
		t.Errorf("examples/bench/spider2-size.yaml = %+v, Standard() = %+v", sc, want)
	}
}

func TestScenarioValidate(t *testing.T) {
	t.Parallel()
	if err := Standard().Validate(); err != nil {
		t.Fatalf("the standard scenario: %v", err)
	}
	for _, tc := range []struct {
		want   string
		change func(*Scenario)
	}{
		{"examples (--examples) is 0", func(s *Scenario) { s.Examples = 0 }},
		{"votes (--votes) is -1", func(s *Scenario) { s.Votes = -1 }},
		{"generators (--generators) is 0", func(s *Scenario) { s.Generators = 0 }},
		{"rpm (--rpm) is -5", func(s *Scenario) { s.RPM = -5 }},
		{"told_rpm (--told-rpm) is -2", func(s *Scenario) { s.ToldRPM = -2 }},
		{"stranger_rpm (--stranger-rpm) is -1", func(s *Scenario) { s.StrangerRPM = -1 }},
	} {
		sc := Standard()
		tc.change(&sc)
		if err := sc.Validate(); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("error %v, want %q", err, tc.want)
		}
	}
}

// TestBenchPricesCachedPrompts: scenario (c) in short, through llmsim's
// prompt cache over HTTP and a real redis-server: an example's candidates
// share their prompt's start, so most prompt tokens are cached, and the
// money per example is the tokens at the scenario's price with cached
// input at its own.
func TestBenchPricesCachedPrompts(t *testing.T) {
	tier.Servers(t, "a cluster")
	t.Parallel()
	sc := Standard()
	sc.Dataset = "../../../examples/demo"
	sc.Examples, sc.Votes, sc.RPM = 6, 4, 6000
	sc.FirstTokenMS, sc.TokensPerSecond = 20, 0
	sc.Generators, sc.GeneratorConcurrency, sc.Explorers, sc.ExplorerConcurrency = 1, 4, 1, 4
	sc.Scaling = nil
	sc.PromptCache = true
	// llmsim caches a prompt from its first token on, as providers do: the
	// candidates' shared prompt is read from the cache when the first is
	// sent ahead.
	sc.WarmUp = true
	sc.Price = &llm.Price{Input: 2.5, CachedInput: 1.25, Output: 10}
	rep, err := Run(context.Background(), sc, t.TempDir(), io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	if rep.FailedExamples != 0 || rep.CachedShare < 0.5 {
		t.Errorf("%d failed, cached share %.3f of %d prompt tokens; want none failed and most of the prompts cached", rep.FailedExamples, rep.CachedShare, rep.PromptTokens)
	}
	if rep.WarmUpWaitPerExample <= 0 {
		t.Errorf("no call waited for its prompt's warm-up (%.3f s per example); want the candidates after the first to wait", rep.WarmUpWaitPerExample)
	}
	c := rep.Run.Totals.Cost.LLM
	want := (float64(c.PromptTokens-c.CachedTokens)*2.5 + float64(c.CachedTokens)*1.25 + float64(c.CompletionTokens)*10) / 1e6 / float64(rep.Examples)
	if d := rep.MoneyPerExample - want; d > 1e-9 || d < -1e-9 {
		t.Errorf("money per example %v, want %v from the run's tokens", rep.MoneyPerExample, want)
	}
}
