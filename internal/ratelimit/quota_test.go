package ratelimit

import (
	"context"
	"testing"
	"time"

	"github.com/quorumsql/quorum/internal/testutil/redistest"
	"github.com/quorumsql/quorum/pkg/llm"
)

func TestLLMBudgetQuotaAndGroup(t *testing.T) {
	t.Parallel()
	b := &LLMBudget{Scope: "llm", Default: LLMQuota{RequestsPerMinute: 600},
		Quotas: map[string]LLMQuota{"o3": {RequestsPerMinute: 30}}}
	tests := []struct {
		name   string
		bucket llm.Bucket
		quota  LLMQuota
		group  string
	}{
		{"default endpoint keeps the old keys", llm.Bucket{Endpoint: llm.DefaultEndpoint, Model: "gpt-4o"}, LLMQuota{RequestsPerMinute: 600}, "llm:gpt-4o"},
		{"empty endpoint is the default one", llm.Bucket{Model: "gpt-4o"}, LLMQuota{RequestsPerMinute: 600}, "llm:gpt-4o"},
		{"per-model quota without an endpoint quota", llm.Bucket{Model: "o3"}, LLMQuota{RequestsPerMinute: 30}, "llm:o3"},
		{"endpoint quota wins", llm.Bucket{Endpoint: "fast", Model: "o3", Quota: llm.Quota{TokensPerMinute: 1000}}, LLMQuota{TokensPerMinute: 1000}, "llm@fast:o3"},
		{"named endpoint without quota takes the default", llm.Bucket{Endpoint: "slow", Model: "gpt-4o"}, LLMQuota{RequestsPerMinute: 600}, "llm@slow:gpt-4o"},
		{"model names with colons stay apart", llm.Bucket{Endpoint: "llama3", Model: "8b"}, LLMQuota{RequestsPerMinute: 600}, "llm@llama3:8b"},
		{"...from the default endpoint's", llm.Bucket{Model: "llama3:8b"}, LLMQuota{RequestsPerMinute: 600}, "llm:llama3:8b"},
	}
	for _, tt := range tests {
		if q := b.quota(context.Background(), tt.bucket); q != tt.quota {
			t.Errorf("%s: quota %+v, want %+v", tt.name, q, tt.quota)
		}
		if g := b.group(tt.bucket); g != tt.group {
			t.Errorf("%s: group %q, want %q", tt.name, g, tt.group)
		}
	}
}

// TestLLMBudgetBucketsPerEndpoint: one model on two endpoints draws on two
// buckets, each at its endpoint's quota; an endpoint without quota under a
// zero default is unlimited and touches no key.
func TestLLMBudgetBucketsPerEndpoint(t *testing.T) {
	t.Parallel()
	srv := redistest.Start(t)
	rdb := srv.Client(t)
	l, _ := New(Config{Client: rdb, Prefix: "t:"})
	b := &LLMBudget{Limiter: l, Scope: "s"}
	ctx := context.Background()
	// One request a minute (burst 1): the second call is told to wait
	// about a minute (the wait the limiter computes, not one spent).
	slow := llm.Bucket{Endpoint: "slow", Model: "m", Quota: llm.Quota{RequestsPerMinute: 1}}
	fast := llm.Bucket{Endpoint: "fast", Model: "m", Quota: llm.Quota{RequestsPerMinute: 6000}}
	if _, err := b.Acquire(ctx, slow, 100); err != nil {
		t.Fatal(err)
	}
	if told, ok, err := l.Try(ctx, b.group(slow), b.claims(context.Background(), slow, 100)...); err != nil || ok || told < 30*time.Second || told > 2*time.Minute {
		t.Errorf("second call on a 1/min endpoint: admitted %v, told to wait %v (err %v); want about a minute", ok, told, err)
	}
	// The same model on another endpoint is not held up by the first:
	// each call is admitted at once, on its burst.
	for i := 0; i < 5; i++ {
		if told, ok, err := l.Try(ctx, b.group(fast), b.claims(context.Background(), fast, 100)...); err != nil || !ok {
			t.Fatalf("call %d on the fast endpoint: admitted %v, told to wait %v (err %v); want admitted at once", i, ok, told, err)
		}
	}
	for _, k := range []string{"t:llm:s@slow:m:rpm", "t:llm:s@fast:m:rpm"} {
		if n, err := rdb.Exists(ctx, k).Result(); err != nil || n != 1 {
			t.Errorf("key %s: exists %d, %v", k, n, err)
		}
	}
	// A 429 on one endpoint pauses that endpoint only.
	if err := b.Cooldown(ctx, fast, time.Minute); err != nil {
		t.Fatal(err)
	}
	if n, _ := rdb.Exists(ctx, "t:cooldown:s@fast:m").Result(); n != 1 {
		t.Error("no cooldown key for the fast endpoint")
	}
	free := llm.Bucket{Endpoint: "free", Model: "m"}
	if _, err := b.Acquire(ctx, free, 100); err != nil {
		t.Errorf("unlimited endpoint: %v", err)
	}
	if keys, _ := rdb.Keys(ctx, "t:*free*").Result(); len(keys) != 0 {
		t.Errorf("an unlimited endpoint wrote keys %v", keys)
	}
}
