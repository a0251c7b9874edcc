package metrics

import (
	"context"
	"errors"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/quorumsql/quorum/pkg/cost"
	"github.com/quorumsql/quorum/pkg/llm"
)

func TestServeHealthReadinessAndMetrics(t *testing.T) {
	t.Parallel()
	m := New("generator")
	m.ObserveCost("generate", cost.Cost{LLMCalls: 3, LLM: llm.Usage{PromptTokens: 100, CompletionTokens: 20, RateLimited: 2, Latency: time.Second}, Queries: 2,
		ByModel: map[string]*cost.ModelCost{"eu/gpt-4o": {Calls: 3, Money: 0.125}}})
	done := m.Begin("generate", "sqlite")
	ready := errors.New("redis: connection refused")
	l, err := Listen("127.0.0.1:0", m, func() error { return ready })
	if err != nil {
		t.Fatal(err)
	}
	if err := l.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	defer l.Stop()
	addr := l.Addr()
	get := func(path string) (int, string) {
		resp, err := http.Get("http://" + addr.String() + path)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
	if code, _ := get("/healthz"); code != 200 {
		t.Errorf("/healthz %d", code)
	}
	if code, body := get("/readyz"); code != 503 || !strings.Contains(body, "connection refused") {
		t.Errorf("/readyz %d %q, want 503 with the reason", code, body)
	}
	ready = nil
	if code, _ := get("/readyz"); code != 200 {
		t.Errorf("/readyz %d after recovery", code)
	}
	_, body := get("/metrics")
	for _, want := range []string{
		`quorum_llm_calls_total{result="ok",role="generator",stage="generate"} 3`,
		`quorum_llm_tokens_total{kind="prompt",role="generator"} 100`,
		`quorum_llm_rate_limited_total{role="generator"} 2`,
		`quorum_llm_money_total{model="eu/gpt-4o",role="generator",stage="generate"} 0.125`,
		`quorum_tasks_in_flight{role="generator",stage="generate",warehouse="sqlite"} 1`,
	} {
		if !strings.Contains(body, want) {
			t.Errorf("/metrics lacks %s", want)
		}
	}
	done()
	if _, body := get("/metrics"); !strings.Contains(body, `quorum_tasks_in_flight{role="generator",stage="generate",warehouse="sqlite"} 0`) {
		t.Error("in-flight gauge not decremented")
	}
}
