package llmsim_test

import (
	"bytes"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/quorumsql/quorum/pkg/dataset"
	"github.com/quorumsql/quorum/pkg/llmsim"
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
	resp, err := http.Post(ts.URL+"/v1/chat/completions", "application/json", bytes.NewReader([]byte(body)))
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusRequestEntityTooLarge {
		t.Errorf("an oversize body: HTTP %d, want 413", resp.StatusCode)
	}
}
