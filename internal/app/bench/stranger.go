package bench

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"net/http"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/quorumsql/quorum/internal/ratelimit"
)

// stranger is another client of the provider's quota (Scenario.StrangerRPM):
// another team's application on the same deployment. It sends requests at a
// steady rate whatever the provider's load, and retries a 429 after the
// delay the provider names, as a well-behaved client does.
type stranger struct {
	cancel context.CancelFunc
	wg     sync.WaitGroup
	rpm    int
	start  time.Time

	requests, served, rateLimited, failed atomic.Int64
	prompt, completion                    atomic.Int64
}

// StrangerFigures is what the stranger sent and was served; SharedRatio
// is the provider's capacity the run and the stranger used together.
type StrangerFigures struct {
	DemandRPM        int     `json:"demand_rpm"`
	Requests         int64   `json:"requests"`
	Served           int64   `json:"served"`
	ServedRPM        float64 `json:"served_rpm"`
	RateLimited      int64   `json:"rate_limited"`
	RateLimitedShare float64 `json:"rate_limited_share"`
	Failed           int64   `json:"failed"`
	PromptTokens     int64   `json:"prompt_tokens"`
	CompletionTokens int64   `json:"completion_tokens"`
	SharedRatio      float64 `json:"shared_ratio"`
}

// startStranger sends rpm requests a minute to the chat completions of
// baseURL until stop.
func startStranger(ctx context.Context, baseURL string, rpm int) *stranger {
	ctx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	s := &stranger{cancel: cancel, rpm: rpm, start: time.Now()}
	s.wg.Add(1)
	go func() {
		defer s.wg.Done()
		t := time.NewTicker(time.Duration(float64(time.Minute) / float64(rpm)))
		defer t.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-t.C:
				s.wg.Add(1)
				go func() { defer s.wg.Done(); s.ask(ctx, baseURL) }()
			}
		}
	}()
	return s
}

// ask sends one request until it is served, retrying 429s after the
// provider's delay.
func (s *stranger) ask(ctx context.Context, baseURL string) {
	body, _ := json.Marshal(map[string]any{"model": "gpt-4o", "max_tokens": 16,
		"messages": []map[string]string{{"role": "user", "content": "Another team's application: say hello."}}})
	for ctx.Err() == nil {
		req, err := http.NewRequestWithContext(ctx, http.MethodPost, baseURL+"/chat/completions", bytes.NewReader(body))
		if err != nil {
			return
		}
		req.Header.Set("Content-Type", "application/json")
		s.requests.Add(1)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			if ctx.Err() == nil {
				s.failed.Add(1)
			}
			return
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		switch resp.StatusCode {
		case http.StatusOK:
			var r struct {
				Usage struct {
					Prompt     int64 `json:"prompt_tokens"`
					Completion int64 `json:"completion_tokens"`
				} `json:"usage"`
			}
			_ = json.Unmarshal(b, &r)
			s.served.Add(1)
			s.prompt.Add(r.Usage.Prompt)
			s.completion.Add(r.Usage.Completion)
			return
		case http.StatusTooManyRequests:
			s.rateLimited.Add(1)
			wait := time.Second
			if ms, err := strconv.ParseFloat(resp.Header.Get("Retry-After-Ms"), 64); err == nil {
				wait = time.Duration(ms * float64(time.Millisecond))
			}
			select {
			case <-ctx.Done():
				return
			case <-time.After(wait):
			}
		default:
			s.failed.Add(1)
			return
		}
	}
}

// stop ends the stranger's requests (those in flight are abandoned) and
// says what it sent and was served; nil for no stranger.
func (s *stranger) stop() *StrangerFigures {
	if s == nil {
		return nil
	}
	wall := time.Since(s.start).Seconds()
	s.cancel()
	s.wg.Wait()
	f := &StrangerFigures{DemandRPM: s.rpm, Requests: s.requests.Load(), Served: s.served.Load(), RateLimited: s.rateLimited.Load(),
		Failed: s.failed.Load(), PromptTokens: s.prompt.Load(), CompletionTokens: s.completion.Load()}
	if wall > 0 {
		f.ServedRPM = float64(f.Served) / wall * 60
	}
	if f.Requests > 0 {
		f.RateLimitedShare = float64(f.RateLimited) / float64(f.Requests)
	}
	return f
}

// learned adds what the limiter learned of model's quota, the run's 429
// share and, with a stranger, the capacity both used.
func (r *Report) learned(ctx context.Context, lim *ratelimit.Limiter, model string, sf *StrangerFigures) error {
	ll, err := lim.LearnedLLM(ctx, ratelimit.LLMGroup("llm", "", model))
	if err != nil {
		return fmt.Errorf("bench: %w", err)
	}
	r.LearnedRPM, r.StatedRPM = ll.RPM, ll.HeaderRPM
	if n := r.LLMCalls + r.RateLimited; n > 0 {
		r.RateLimitedShare = float64(r.RateLimited) / float64(n)
	}
	if sf != nil {
		r.Stranger = sf
		if rpm := float64(r.Scenario.RPM); rpm > 0 && r.Wall > 0 {
			sf.SharedRatio = math.Max(0, float64(r.LLMCalls+sf.Served)-rpm/60) / rpm * 60 / r.Wall
		}
	}
	return nil
}
