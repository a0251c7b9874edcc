package llmsim_test

import (
	"bytes"
	"context"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/quorumsql/quorum/internal/llmsim"
	"github.com/quorumsql/quorum/pkg/dataset"
)

// TestRequestBodyIsBounded: a body over MaxRequestBytes gets 413, not the
// simulator's memory.
func TestRequestBodyIsBounded(t *testing.T) {
	t.Parallel()
	ds, err := dataset.Load("../../examples/demo", dataset.Options{})
	if err != nil {
		t.Fatal(err)
	}
	sim, err := llmsim.New(llmsim.Config{Dataset: ds})
	if err != nil {
		t.Fatal(err)
	}
	ts := httptest.NewServer(sim)
	defer ts.Close()
	body := `{"model":"m","messages":[{"role":"user","content":"` + strings.Repeat("x", llmsim.MaxRequestBytes+1) + `"}]}`
	// A broken bound would read the body and answer its 32 MiB prompt for
	// minutes: the request gets a deadline far above a refusal's
	// milliseconds, so the test fails instead of hanging.
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, ts.URL+"/v1/chat/completions", bytes.NewReader([]byte(body)))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatalf("an oversize body: %v (a refusal takes milliseconds: the body is not bounded before it is read)", err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusRequestEntityTooLarge {
		t.Errorf("an oversize body: HTTP %d, want 413", resp.StatusCode)
	}
}
