package queue

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// apiPatience is how long a JetStream API call that creates or updates a
// stream or consumer is tried again while the cluster cannot answer it: a
// three-node cluster electing a leader, or forming an R3 consumer's group
// on a loaded machine, answers after JetStream's 5 s request timeout. A
// role that gave up on the first timeout would exit at start-up for what
// a few seconds cure.
const apiPatience = time.Minute

// transient reports whether err is a JetStream API call that got no answer
// in time, or a "try again" answer, rather than a refusal.
func transient(ctx context.Context, err error) bool {
	if ctx.Err() != nil {
		return false
	}
	if errors.Is(err, context.DeadlineExceeded) || errors.Is(err, nats.ErrTimeout) || errors.Is(err, nats.ErrNoResponders) {
		return true
	}
	var apiErr *jetstream.APIError
	return errors.As(err, &apiErr) && apiErr.Code == 503
}

// retryAPI runs call until it succeeds, fails with a refusal, ctx ends or
// apiPatience has passed, backing off from 250 ms to 4 s between tries.
func retryAPI(ctx context.Context, what string, call func() error) error {
	deadline := time.Now().Add(apiPatience)
	wait := 250 * time.Millisecond
	for tries := 1; ; tries++ {
		err := call()
		if err == nil || !transient(ctx, err) {
			return err
		}
		if time.Now().Add(wait).After(deadline) {
			return fmt.Errorf("%s: no answer from JetStream in %d tries over %s: %w", what, tries, apiPatience, err)
		}
		select {
		case <-ctx.Done():
			return err
		case <-time.After(wait):
		}
		wait = min(2*wait, 4*time.Second)
	}
}
