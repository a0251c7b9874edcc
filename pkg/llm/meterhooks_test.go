package llm_test

import (
	"context"
	"errors"
	"testing"

	"github.com/quorumsql/quorum/pkg/llm"
	"github.com/quorumsql/quorum/pkg/llmsim"
)

// TestMeterHooks: a meter's After hook is told each answered call's usage
// before the call returns (what it cancels, the next call sees), and its
// Before hook refuses a call without sending it.
func TestMeterHooks(t *testing.T) {
	t.Parallel()
	ds := demo(t)
	s, ts := sim(t, llmsim.Config{Dataset: ds})
	c := client(t, llm.Config{BaseURL: ts.URL + "/v1"})
	ctx, stop := context.WithCancelCause(context.Background())
	defer stop(nil)
	capped := errors.New("capped")
	var told []llm.Usage
	m := llm.NewMeter(llm.MeterHooks{
		Before: func(ctx context.Context) error { return context.Cause(ctx) },
		After: func(u llm.Usage) {
			told = append(told, u)
			stop(capped)
		},
	})
	ctx = llm.WithMeter(ctx, m)
	resp, err := c.Chat(ctx, generate(ds.Examples[3].Question, 1))
	if err != nil {
		t.Fatal(err)
	}
	if len(told) != 1 || told[0].PromptTokens != resp.Usage.PromptTokens || told[0].CompletionTokens != resp.Usage.CompletionTokens {
		t.Fatalf("After was told %+v; want the answered call's usage %+v once", told, resp.Usage)
	}
	// After cancelled the context: the next call is refused, not sent.
	_, err = c.Chat(ctx, generate(ds.Examples[3].Question, 2))
	var ce *llm.CallError
	if !errors.Is(err, capped) || !errors.As(err, &ce) || ce.Attempts != 0 {
		t.Errorf("the call after the cap: %v; want a CallError of no attempt wrapping the refusal", err)
	}
	if n := s.Stats().Requests; n != 1 {
		t.Errorf("the simulator served %d requests, want 1", n)
	}
	if calls, u := m.Total(); calls != 1 || u.PromptTokens != resp.Usage.PromptTokens {
		t.Errorf("the meter counted %d calls, %+v", calls, u)
	}
}
