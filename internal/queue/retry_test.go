package queue

import (
	"context"
	"errors"
	"fmt"
	"testing"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// TestTransient: only a call that got no answer in time, or a 503, is tried
// again; a refusal, or a caller that gave up, is not.
func TestTransient(t *testing.T) {
	live := context.Background()
	gone, cancel := context.WithCancel(context.Background())
	cancel()
	tests := []struct {
		name string
		ctx  context.Context
		err  error
		want bool
	}{
		{"JetStream's request timeout", live, fmt.Errorf("consumer: %w", context.DeadlineExceeded), true},
		{"nats timeout", live, nats.ErrTimeout, true},
		{"no responders (no leader yet)", live, nats.ErrNoResponders, true},
		{"503 from the API", live, &jetstream.APIError{Code: 503, Description: "JetStream system temporarily unavailable"}, true},
		{"a refusal", live, &jetstream.APIError{Code: 400, Description: "insufficient resources"}, false},
		{"stream not found", live, jetstream.ErrStreamNotFound, false},
		{"the caller gave up", gone, context.DeadlineExceeded, false},
		{"another error", live, errors.New("boom"), false},
	}
	for _, tt := range tests {
		if got := transient(tt.ctx, tt.err); got != tt.want {
			t.Errorf("%s: transient(%v) = %v, want %v", tt.name, tt.err, got, tt.want)
		}
	}
}

// TestRetryAPI: transient failures are tried again until the call answers;
// a refusal returns at once.
func TestRetryAPI(t *testing.T) {
	ctx := context.Background()
	n := 0
	err := retryAPI(ctx, "x", func() error {
		if n++; n < 3 {
			return nats.ErrTimeout
		}
		return nil
	})
	if err != nil || n != 3 {
		t.Fatalf("after two timeouts: err %v after %d calls, want success on the 3rd", err, n)
	}
	n = 0
	refusal := &jetstream.APIError{Code: 400}
	if err := retryAPI(ctx, "x", func() error { n++; return refusal }); !errors.Is(err, refusal) || n != 1 {
		t.Fatalf("a refusal: err %v after %d calls, want it at once", err, n)
	}
}
