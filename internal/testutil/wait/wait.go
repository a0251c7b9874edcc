// Package wait is how a test waits: on an event (Recv) where the code
// offers one, else on a condition checked until it holds (For), never on
// a fixed sleep, which is too short on a loaded machine and too long on
// an idle one. Timeouts are a failure's bound, not a wait: give them
// room (seconds, not milliseconds).
package wait

import (
	"testing"
	"time"
)

// poll is how often For checks its condition.
const poll = 10 * time.Millisecond

// For returns once cond holds, checking it every few milliseconds; after
// timeout it fails the test saying what it waited for. cond runs on the
// test's goroutine and may call t.Fatal.
func For(t testing.TB, timeout time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("waited %s for %s", timeout, what)
		}
		time.Sleep(poll)
	}
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
