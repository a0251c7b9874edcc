package wait_test

import (
	"fmt"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/quorumsql/quorum/internal/testutil/wait"
)

// fatal is a testing.TB whose Fatalf ends only the goroutine it runs on,
// recording the message, as testing's does.
type fatal struct {
	testing.TB
	msg string
}

func (f *fatal) Helper() {}
func (f *fatal) Fatalf(format string, args ...any) {
	f.msg = fmt.Sprintf(format, args...)
	panic(f)
}

// failure runs fn with a recording TB and returns what it failed with.
func failure(t *testing.T, fn func(tb testing.TB)) string {
	f := &fatal{TB: t}
	func() {
		defer func() {
			if r := recover(); r != nil && r != f {
				panic(r)
			}
		}()
		fn(f)
	}()
	return f.msg
}

func TestFor(t *testing.T) {
	t.Parallel()
	var n atomic.Int32
	go func() {
		for range 3 {
			n.Add(1)
		}
	}()
	if msg := failure(t, func(tb testing.TB) { wait.For(tb, 10*time.Second, "three", func() bool { return n.Load() == 3 }) }); msg != "" {
		t.Errorf("a condition that comes true failed: %s", msg)
	}
	msg := failure(t, func(tb testing.TB) { wait.For(tb, 30*time.Millisecond, "never", func() bool { return false }) })
	if !strings.Contains(msg, "waited 30ms for never") {
		t.Errorf("a condition that never holds: %q", msg)
	}
}

func TestUntil(t *testing.T) {
	t.Parallel()
	var n atomic.Int32
	go func() {
		for range 3 {
			n.Add(1)
		}
	}()
	if !wait.Until(10*time.Second, func() bool { return n.Load() == 3 }) {
		t.Error("a condition that comes true: Until returned false")
	}
	if wait.Until(30*time.Millisecond, func() bool { return false }) {
		t.Error("a condition that never holds: Until returned true")
	}
}

func TestRecv(t *testing.T) {
	t.Parallel()
	ch := make(chan int, 1)
	ch <- 7
	if v := wait.Recv(t, 10*time.Second, "a value", ch); v != 7 {
		t.Errorf("got %d", v)
	}
	if msg := failure(t, func(tb testing.TB) { wait.Recv(tb, 20*time.Millisecond, "nothing", ch) }); !strings.Contains(msg, "waited 20ms for nothing") {
		t.Errorf("a value that never comes: %q", msg)
	}
	close(ch)
	if msg := failure(t, func(tb testing.TB) { wait.Recv(tb, time.Second, "more", ch) }); !strings.Contains(msg, "the channel closed") {
		t.Errorf("a closed channel: %q", msg)
	}
}
