package bench

import (
	"bytes"
	"context"
	"strings"
	"testing"
	"time"

	"github.com/quorumsql/quorum/internal/runtime/runstate"
	"github.com/quorumsql/quorum/internal/testutil/tier"
)

// TestMixedQuestionsDoNotWaitForTheBatch runs a small mixed benchmark
// through the real pieces (embedded NATS, redis-server, llmsim over HTTP,
// the question API over HTTP): questions on the idle cluster, then the
// same questions while a batch run, held to its quota, keeps every
// generator slot busy. Every run checks that each phase's questions are
// answered, its figures are there and consistent, and the runs' state is
// retained as it should be. What depends on the machine's speed is
// checked under make slow (QUORUM_SLOW=1) only, and reported by make
// bench's mixed scenario against its thresholds: the questions began with
// every generator slot busy, each finished long before the batch did,
// and no call drew a 429.
func TestMixedQuestionsDoNotWaitForTheBatch(t *testing.T) {
	tier.Servers(t, "a cluster and a batch run (~20s)")
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	ms := StandardMixed()
	ms.Dataset = "../../../examples/demo"
	// A batch the quota stretches to several times a question's latency:
	// 8 examples x 4 candidates at 300 requests a minute, fast calls.
	ms.Examples, ms.Votes, ms.RPM = 8, 4, 300
	ms.FirstTokenMS, ms.TokensPerSecond = 20, 0
	ms.Generators, ms.GeneratorConcurrency, ms.Explorers, ms.ExplorerConcurrency = 2, 4, 1, 4
	ms.Questions, ms.QuestionVotes, ms.IntervalMS = 2, 2, 500
	var progress bytes.Buffer
	rep, err := Mixed(ctx, ms, t.TempDir(), &progress)
	if err != nil {
		t.Fatalf("%v\n%s", err, progress.String())
	}
	t.Logf("idle p50 %.2fs, mixed p50 %.2fs (ratio %.2f), batch %.1fs; %s",
		rep.Idle.P50, rep.Mixed.P50, rep.RatioP50, rep.Batch.Wall, strings.Join(rep.Verdict, "; "))

	for name, p := range map[string]Phase{"idle": rep.Idle, "mixed": rep.Mixed} {
		if p.Answered != ms.Questions || p.Failed != 0 || len(p.Questions) != ms.Questions {
			t.Errorf("%s: %d answered, %d failed of %d: %+v", name, p.Answered, p.Failed, ms.Questions, p.Questions)
		}
		if p.P50 <= 0 || p.P95 < p.P50 || p.Max < p.P95 || p.ClientP50 < p.P50 || p.ChainP50 <= 0 || p.Wall < p.P50 {
			t.Errorf("%s: latencies p50 %.2f p95 %.2f max %.2f client %.2f chain %.2f wall %.2f", name, p.P50, p.P95, p.Max, p.ClientP50, p.ChainP50, p.Wall)
		}
		if p.ProviderRequests <= 0 || p.QuestionLLMCalls <= 0 {
			t.Errorf("%s: provider requests %d, questions' LLM calls %d", name, p.ProviderRequests, p.QuestionLLMCalls)
		}
		for _, q := range p.Questions {
			if q.ID == "" || q.Status != "answered" || q.Seconds <= 0 || q.LLMCalls <= 0 || q.ChainSeconds <= 0 || q.Finished.IsZero() {
				t.Errorf("%s: question %+v", name, q)
			}
		}
	}
	// How many of the batch's calls fell within the questions' short
	// window depends on the machine's speed (fast questions can take the
	// quota's whole share for that second): logged, not asserted; that the
	// batch was running is (InFlightAtStart, FinishedAfterQuestions).
	t.Logf("mixed phase: the provider served %d requests, the questions made %d", rep.Mixed.ProviderRequests, rep.Mixed.QuestionLLMCalls)
	b := rep.Batch
	if b.Report == nil || b.Examples != ms.Examples || b.Report.Examples != ms.Examples || b.Failed != 0 || b.Run == "" {
		t.Fatalf("batch %+v", b)
	}
	if b.GeneratorSlots != 8 || b.ExplorerSlots != 4 {
		t.Errorf("%d generator slots and %d explorer slots, want 8 and 4", b.GeneratorSlots, b.ExplorerSlots)
	}
	if b.WindowSeconds <= 0 || b.CallsPerMinute < 0 || b.TotalCallsPerMinute <= 0 || b.TotalCallsPerMinute < b.CallsPerMinute || b.QuotaShareInWindow <= 0 {
		t.Errorf("batch during the questions: window %.2fs, %.0f calls/min (%.0f in all, %.2f of the quota)",
			b.WindowSeconds, b.CallsPerMinute, b.TotalCallsPerMinute, b.QuotaShareInWindow)
	}
	if rep.RatioP50 <= 0 || len(rep.Verdict) != 3 || rep.RateLimitedSource == "" {
		t.Errorf("ratio %.2f, verdict %v", rep.RatioP50, rep.Verdict)
	}
	limited := rep.Idle.ProviderRateLimited + rep.Mixed.ProviderRateLimited + b.ProviderRateLimited
	t.Logf("questions began with %d tasks in flight; batch finished after them %v; %d 429s", b.InFlightAtStart, b.FinishedAfterQuestions, limited)
	if slowRun() {
		// The questions asked while every generator slot was busy did not
		// wait for the batch: each finished before it, in well under half
		// its wall time.
		if b.InFlightAtStart < b.GeneratorSlots {
			t.Errorf("the questions began with %d tasks in flight, %d generator slots", b.InFlightAtStart, b.GeneratorSlots)
		}
		if !b.FinishedAfterQuestions {
			t.Errorf("the batch (%.1fs) finished before the questions asked during it", b.Wall)
		}
		for _, q := range rep.Mixed.Questions {
			if !q.BeforeBatchEnd || q.Seconds > b.Wall/2 {
				t.Errorf("question %q took %.2fs during a batch of %.1fs (finished before it: %v)", q.Question, q.Seconds, b.Wall, q.BeforeBatchEnd)
			}
		}
		// The limiter holds everyone to the provider's quota.
		if limited != 0 {
			t.Errorf("%d 429s with the limiter set to the provider's quota", limited)
		}
	}
	// Retention: every question's files are gone (its critical path came
	// from its record, above), and every key of the batch's and the
	// questions' runs expires within the default retention.
	if rep.QuestionFilesLeft != 0 {
		t.Errorf("%d question runs' folders left under the state directory", rep.QuestionFilesLeft)
	}
	checkRedis(t, rep.Redis, 1+2*ms.Questions)
	for _, want := range []string{"phase 1", "under way", "phase 2"} {
		if !strings.Contains(progress.String(), want) {
			t.Errorf("progress lacks %q:\n%s", want, progress.String())
		}
	}
}

func TestMixedScenarioValidate(t *testing.T) {
	t.Parallel()
	if err := StandardMixed().Validate(); err != nil {
		t.Fatalf("the standard mixed scenario: %v", err)
	}
	for _, tc := range []struct {
		want   string
		change func(*MixedScenario)
	}{
		{"questions (--questions) is 0", func(s *MixedScenario) { s.Questions = 0 }},
		{"question_votes (--question-votes) is 40", func(s *MixedScenario) { s.QuestionVotes = 40 }},
		{"set a provider limit", func(s *MixedScenario) { s.RPM, s.TPM = 0, 0 }},
		{"examples (--examples) is 0", func(s *MixedScenario) { s.Examples = 0 }},
	} {
		ms := StandardMixed()
		tc.change(&ms)
		if err := ms.Validate(); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("error %v, want %q", err, tc.want)
		}
	}
}

// checkRedis: the ended runs' keys are there, each with an expiry no
// longer than the default retention, and counted in Redis's size.
func checkRedis(t *testing.T, f *RedisFigures, runs int) {
	t.Helper()
	switch {
	case f == nil:
		t.Fatal("no Redis figures")
	case f.Runs != runs || f.RunKeys == 0 || f.RunBytes <= 0:
		t.Errorf("Redis: %d runs, %d keys, %d bytes; want %d runs with keys", f.Runs, f.RunKeys, f.RunBytes, runs)
	case f.RunKeysWithoutTTL != 0:
		t.Errorf("Redis: %d of the runs' %d keys never expire", f.RunKeysWithoutTTL, f.RunKeys)
	case f.RunMaxTTLSeconds <= 0 || f.RunMaxTTLSeconds > runstate.DefaultAnswers.Seconds():
		t.Errorf("Redis: the runs' keys expire within %.0fs, want within the default retention (%v)", f.RunMaxTTLSeconds, runstate.DefaultAnswers)
	case f.Before.Keys < 0 || f.After.Keys < f.Before.Keys+int64(f.RunKeys) || f.After.UsedMemory <= 0:
		t.Errorf("Redis: %+v before, %+v after, with %d run keys", f.Before, f.After, f.RunKeys)
	}
}
