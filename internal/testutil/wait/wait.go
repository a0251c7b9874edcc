// Package wait is how a test waits: on an event (Recv) where the code
// offers one, else on a condition checked until it holds (For, Until), never on
// a fixed sleep, which is too short on a loaded machine and too long on
// an idle one. Timeouts are a failure's bound, not a wait: give them
// room (seconds, not milliseconds).
package wait

import (
	"testing"
	"time"
)

// poll is how often For and Until check their condition at first; a
// long wait backs off to maxPoll, so that a heavy condition (HTTP requests
// to a server under test) does not load the machine it waits on.
const (
	poll    = 10 * time.Millisecond
	maxPoll = 100 * time.Millisecond
)

// For returns once cond holds, checking it every few milliseconds; after
// timeout it fails the test saying what it waited for. cond runs on the
// test's goroutine and may call t.Fatal.
func For(t testing.TB, timeout time.Duration, what string, cond func() bool) {
	t.Helper()
	if !Until(timeout, cond) {
		t.Fatalf("waited %s for %s", timeout, what)
	}
}

// Until is For that does not fail: it returns whether cond held within
// timeout, for a caller that says itself what it saw (the state the wait
// ended in), or that goes on and checks the outcome after. cond runs on
// the caller's goroutine and may call t.Fatal.
func Until(timeout time.Duration, cond func() bool) bool {
	deadline := time.Now().Add(timeout)
	for every := poll; !cond(); every = min(every*3/2, maxPoll) {
		if time.Now().After(deadline) {
			return false
		}
		time.Sleep(every)
	}
	return true
}

// Recv returns the next value from ch; after timeout, or when ch is
// closed, it fails the test saying what it waited for.
func Recv[T any](t testing.TB, timeout time.Duration, what string, ch <-chan T) T {
	t.Helper()
	select {
	case v, ok := <-ch:
		if !ok {
			t.Fatalf("waiting for %s: the channel closed", what)
		}
		return v
	case <-time.After(timeout):
		t.Fatalf("waited %s for %s", timeout, what)
	}
	panic("unreachable")
}
