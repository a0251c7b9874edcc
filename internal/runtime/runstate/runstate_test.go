package runstate_test

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/quorumsql/quorum/internal/runtime/runstate"
	"github.com/quorumsql/quorum/internal/testutil/redistest"
)

// TestOnceComputesOnce: many callers racing for the same names (as
// redeliveries and concurrent tasks do) compute each value exactly once
// and all read it, including callers that arrive just as the holder lets
// go of its lease.
func TestOnceComputesOnce(t *testing.T) {
	t.Parallel()
	s := runstate.New(redistest.Start(t).Client(t))
	ctx := context.Background()
	for n := range 30 {
		name := fmt.Sprintf("value-%d", n)
		var computed atomic.Int64
		var wg sync.WaitGroup
		for i := range 16 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				// The scenario: callers arrive over a few milliseconds,
				// some just as the holder lets go of its lease.
				time.Sleep(time.Duration(i%4) * time.Millisecond)
				v, err := s.Once(ctx, "run", "ex", "agent", name, func(context.Context) (string, error) {
					computed.Add(1)
					time.Sleep(2 * time.Millisecond) // the scenario: a computation that takes a while
					return name + "!", nil
				})
				if err != nil || v != name+"!" {
					t.Errorf("%s: got %q, %v", name, v, err)
				}
			}()
		}
		wg.Wait()
		if c := computed.Load(); c != 1 {
			t.Fatalf("%s computed %d times, want once", name, c)
		}
	}
}
