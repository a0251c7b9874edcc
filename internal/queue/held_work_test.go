package queue_test

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/quorumsql/quorum/internal/queue"
	"github.com/quorumsql/quorum/pkg/slot"
)

// TestWaitingHoldsNoSlot: a handler waiting under slot.Idle leaves its
// slot to another message, so a loop holds up to MaxHeld messages while
// running no more than Concurrency at once; MaxHeld unset holds only
// what runs.
func TestWaitingHoldsNoSlot(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name              string
		concurrency, held int
		wantWaiting       int
	}{
		{"one slot, four held", 1, 4, 4},
		{"two slots, six held", 2, 6, 6},
		{"held unset", 2, 0, 2},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			q := connect(t, queue.Config{AckWait: 30 * time.Second})
			msgs := tc.wantWaiting + 3
			for i := range msgs {
				id := fmt.Sprintf("m%d", i)
				if err := q.Publish(context.Background(), queue.Subject("r", queue.StageGenerate, "sqlite"), id, task{V: queue.Version, N: id}); err != nil {
					t.Fatal(err)
				}
			}
			var mu sync.Mutex
			running, maxRunning, waiting, maxWaiting, done := 0, 0, 0, 0, 0
			step := func(dr, dw int) {
				mu.Lock()
				defer mu.Unlock()
				running, waiting = running+dr, waiting+dw
				maxRunning, maxWaiting = max(maxRunning, running), max(maxWaiting, waiting)
			}
			reply := make(chan struct{})
			var replied atomic.Bool
			wc := queue.WorkConfig{Consumer: "g", Filters: []string{"quorum.*.generate.sqlite"}, Concurrency: tc.concurrency, MaxHeld: tc.held,
				Handler: func(ctx context.Context, _ queue.Delivery) error {
					step(1, 0)
					wctx, back := slot.Idle(ctx) // a call to the LLM
					step(-1, 1)
					select {
					case <-reply:
					case <-wctx.Done():
						return wctx.Err()
					}
					step(0, -1)
					back()
					step(1, 0)
					defer step(-1, 0)
					mu.Lock()
					done++
					mu.Unlock()
					return nil
				}}
			run(t, q, wc, func() bool {
				mu.Lock()
				defer mu.Unlock()
				if waiting >= tc.wantWaiting && replied.CompareAndSwap(false, true) {
					close(reply) // every held message waits: the replies come in
				}
				return done == msgs
			})
			if maxWaiting != tc.wantWaiting {
				t.Errorf("at most %d messages waited at once, want %d (concurrency %d, max held %d)", maxWaiting, tc.wantWaiting, tc.concurrency, tc.held)
			}
			if maxRunning > tc.concurrency {
				t.Errorf("%d handlers ran at once outside their waits, want at most %d", maxRunning, tc.concurrency)
			}
		})
	}
}
