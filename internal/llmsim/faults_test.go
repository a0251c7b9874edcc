package llmsim

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"
)

// TestHangAndStallFaults: a hang sends nothing, not even headers (a dead
// endpoint); a stall sends the headers and a stream's first chunks, then
// nothing, and never finishes the reply. Both count as faults.
func TestHangAndStallFaults(t *testing.T) {
	t.Parallel()
	ds := demo(t)
	for _, tt := range []struct {
		name   string
		faults Faults
		stream bool
		// headers: the response headers came; chunk: a stream chunk came.
		headers, chunk bool
	}{
		{"hang, streamed", Faults{Hang: 1, HangFor: time.Minute}, true, false, false},
		{"hang, plain", Faults{Hang: 1, HangFor: time.Minute}, false, false, false},
		{"stall, streamed", Faults{Stall: 1, HangFor: time.Minute}, true, true, true},
		{"stall, plain", Faults{Stall: 1, HangFor: time.Minute}, false, true, false},
	} {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			s, ts := newSim(t, Config{Dataset: ds, Faults: tt.faults})
			body := generateBody(ds.Examples[0].Question, 1)
			if tt.stream {
				body["stream"] = true
				body["stream_options"] = map[string]any{"include_usage": true}
			}
			raw, _ := json.Marshal(body)
			// A stall's headers get room for the first request's start-up
			// (the tokenizer) on a loaded machine; then the body is read
			// for a while, and must not end.
			wait := 30 * time.Second
			if !tt.headers {
				wait = 3 * time.Second
			}
			ctx, cancel := context.WithTimeout(context.Background(), wait)
			defer cancel()
			req, _ := http.NewRequestWithContext(ctx, http.MethodPost, ts.URL+"/v1/chat/completions", bytes.NewReader(raw))
			resp, err := http.DefaultClient.Do(req)
			if !tt.headers {
				if err == nil || !errors.Is(err, context.DeadlineExceeded) {
					t.Fatalf("err = %v, want no headers before the deadline", err)
				}
				return
			}
			if err != nil {
				t.Fatalf("no headers within %s: %v", wait, err)
			}
			defer resp.Body.Close()
			silence := time.AfterFunc(1500*time.Millisecond, cancel)
			defer silence.Stop()
			got, err := io.ReadAll(resp.Body)
			if !errors.Is(err, context.Canceled) || resp.StatusCode != http.StatusOK {
				t.Errorf("status %d, reading the body: %v; want 200 and a body that never ends", resp.StatusCode, err)
			}
			if chunk := strings.Contains(string(got), "chat.completion.chunk"); chunk != tt.chunk || strings.Contains(string(got), "[DONE]") || strings.Contains(string(got), `"finish_reason":"stop"`) {
				t.Errorf("got %q before the silence", got)
			}
			if f := s.Stats().Faults; f != 1 {
				t.Errorf("faults %d, want 1", f)
			}
		})
	}
}

// TestStreamedUsageIsThePlainUsage: with include_usage, a stream ends with
// a usage chunk equal to the plain reply's usage (reasoning tokens too);
// without it, it has none.
func TestStreamedUsageIsThePlainUsage(t *testing.T) {
	t.Parallel()
	ds := demo(t)
	_, ts := newSim(t, Config{Dataset: ds, Personas: Personas{"*": PersonaO3}})
	body := generateBody(ds.Examples[1].Question, 3)
	body["model"] = "o3"
	_, plain := post(t, ts.URL+"/v1/chat/completions", body)
	want, _ := json.Marshal(plain["usage"])
	for _, include := range []bool{true, false} {
		body["stream"] = true
		body["stream_options"] = map[string]any{"include_usage": include}
		raw, _ := json.Marshal(body)
		resp, err := http.Post(ts.URL+"/v1/chat/completions", "application/json", bytes.NewReader(raw))
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		var usage []string
		for _, line := range strings.Split(string(b), "\n") {
			var chunk struct {
				Usage json.RawMessage `json:"usage"`
			}
			if data, ok := strings.CutPrefix(line, "data: "); ok && json.Unmarshal([]byte(data), &chunk) == nil && len(chunk.Usage) > 0 {
				usage = append(usage, string(chunk.Usage))
			}
		}
		switch {
		case include && (len(usage) != 1 || !strings.Contains(string(want), "reasoning_tokens") || !jsonEqual(usage[0], string(want))):
			t.Errorf("include_usage: usage chunks %v, want one equal to the plain %s", usage, want)
		case !include && len(usage) != 0:
			t.Errorf("without include_usage: usage chunks %v", usage)
		}
	}
}

func jsonEqual(a, b string) bool {
	var x, y any
	if json.Unmarshal([]byte(a), &x) != nil || json.Unmarshal([]byte(b), &y) != nil {
		return false
	}
	xa, _ := json.Marshal(x)
	ya, _ := json.Marshal(y)
	return bytes.Equal(xa, ya)
}
