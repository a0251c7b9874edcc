package ratelimit

import (
	"context"
	"testing"
	"time"

	"github.com/quorumsql/quorum/internal/testutil/redistest"
	"github.com/quorumsql/quorum/pkg/llm"
)

// TestLimitsSetOnARunningCluster: a quota set with SetLLMLimit replaces the
// configured one, field by field, in every process's claims once its
// overrides are read again (LimitsRefresh, on a fake clock), and only for
// its group; cleared, the configured quota is back; the changes are
// logged, newest first.
func TestLimitsSetOnARunningCluster(t *testing.T) {
	t.Parallel()
	srv := redistest.Start(t)
	ctx := context.Background()
	clk := &fakeClock{t: time.Unix(1_800_000_000, 0)}
	l, err := New(Config{Client: srv.Client(t), Prefix: "t:"})
	if err != nil {
		t.Fatal(err)
	}
	l.clock = clk
	gpt, other := llm.Bucket{Model: "gpt-4o"}, llm.Bucket{Model: "o3"}
	configured := LLMQuota{RequestsPerMinute: 3000, TokensPerMinute: 1_000_000}
	// Two processes of the cluster: each reads the limits set for itself.
	a := &LLMBudget{Limiter: l, Scope: "llm", Default: configured, Overrides: NewOverrides(l)}
	b := &LLMBudget{Limiter: l, Scope: "llm", Default: configured, Overrides: NewOverrides(l)}
	rates := func(bg *LLMBudget, bk llm.Bucket) (rpm, tpm float64) {
		var req, tok Rate
		for _, c := range bg.claims(ctx, bk, 100) {
			if c.Units == 1 {
				req = c.Rate
			} else {
				tok = c.Rate
			}
		}
		return req.Limit, tok.Limit
	}
	want := func(when string, bg *LLMBudget, bk llm.Bucket, q LLMQuota) {
		t.Helper()
		wr, wt := q.rates()
		if rpm, tpm := rates(bg, bk); rpm != wr.Limit || tpm != wt.Limit {
			t.Errorf("%s: %s's claims at %v rpm, %v tpm; want %v, %v", when, bk.Model, rpm, tpm, wr.Limit, wt.Limit)
		}
	}
	want("before any limit is set", a, gpt, configured)
	want("before any limit is set", b, gpt, configured)

	group := LLMGroup("llm", "", "gpt-4o")
	if err := l.SetLLMLimit(ctx, group, SetQuota{RequestsPerMinute: 1500}); err != nil {
		t.Fatal(err)
	}
	halved := LLMQuota{RequestsPerMinute: 1500, TokensPerMinute: 1_000_000}
	want("within the refresh", a, gpt, configured)
	clk.t = clk.t.Add(LimitsRefresh)
	want("a refresh later", a, gpt, halved)
	want("a refresh later", b, gpt, halved)
	want("another model", a, other, configured)

	clk.t = clk.t.Add(time.Second)
	if err := l.ClearLLMLimit(ctx, group); err != nil {
		t.Fatal(err)
	}
	clk.t = clk.t.Add(LimitsRefresh)
	want("cleared, a refresh later", a, gpt, configured)

	log, err := l.LimitChanges(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if len(log) != 2 || !log[0].Cleared || log[1].Quota.RequestsPerMinute != 1500 || log[1].Group != group || !log[0].At.After(log[1].At) {
		t.Errorf("the changes logged %+v, want the clear then the set of %s at 1500 rpm", log, group)
	}
	// A run's report keeps the changes made while it ran, oldest first.
	during, err := l.LimitChangesBetween(ctx, log[1].At, log[0].At)
	if err != nil {
		t.Fatal(err)
	}
	after, err := l.LimitChangesBetween(ctx, log[1].At.Add(time.Millisecond), log[0].At.Add(time.Hour))
	if err != nil {
		t.Fatal(err)
	}
	if len(during) != 2 || during[0].Cleared || !during[1].Cleared || len(after) != 1 || !after[0].Cleared {
		t.Errorf("changes from the set to the clear %+v, want both, oldest first; from after the set %+v, want the clear", during, after)
	}
	if err := l.SetLLMLimit(ctx, group, SetQuota{}); err == nil {
		t.Error("a limit with neither requests nor tokens was set")
	}
}
