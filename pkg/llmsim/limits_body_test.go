package llmsim_test

import (
	"errors"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/quorumsql/quorum/pkg/dataset"
	"github.com/quorumsql/quorum/pkg/llmsim"
)

// endlessBody is a chat request whose one message never ends. It counts
// what the server reads, and fails a read past twice the bound, so that a
// server without the bound gets an error (a 400) rather than reading, and
// answering, a prompt for minutes.
type endlessBody struct {
	prefix []byte
	read   int
}

var errPastTheBound = errors.New("the test's endless body was read past twice MaxRequestBytes")

func (b *endlessBody) Read(p []byte) (int, error) {
	if b.read >= 2*llmsim.MaxRequestBytes {
		return 0, errPastTheBound
	}
	n := 0
	if b.read < len(b.prefix) {
		n = copy(p, b.prefix[b.read:])
	}
	for ; n < len(p); n++ {
		p[n] = 'x'
	}
	b.read += n
	return n, nil
}

// TestRequestBodyIsBounded: a body over MaxRequestBytes gets 413, and no
// more than the bound is read of it, not the simulator's memory. The
// request goes straight to the handler: whether the bound holds is what
// was read, not how long a slow machine took to send it.
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
	body := &endlessBody{prefix: []byte(`{"model":"m","messages":[{"role":"user","content":"`)}
	req := httptest.NewRequest(http.MethodPost, "/v1/chat/completions", body)
	req.Header.Set("Content-Type", "application/json")
	w := httptest.NewRecorder()
	sim.ServeHTTP(w, req)
	if w.Code != http.StatusRequestEntityTooLarge {
		t.Errorf("an oversize body: HTTP %d (%s), want 413", w.Code, w.Body.String())
	}
	// MaxBytesReader reads one byte past the bound to tell it was passed.
	if body.read > llmsim.MaxRequestBytes+1 {
		t.Errorf("the simulator read %d bytes of an oversize body, want at most MaxRequestBytes+1 (%d)", body.read, llmsim.MaxRequestBytes+1)
	}
}
