package runstate_test

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/quorumsql/quorum/internal/runtime/message"
	"github.com/quorumsql/quorum/internal/runtime/runstate"
	"github.com/quorumsql/quorum/internal/testutil/redistest"
	"github.com/quorumsql/quorum/pkg/runtime/agent"
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
				//clock:ok staggers the arrivals (the scenario); the check is the count of computations
				time.Sleep(time.Duration(i%4) * time.Millisecond)
				v, err := s.Once(ctx, "run", "ex", "agent", name, func(context.Context) (string, error) {
					computed.Add(1)
					time.Sleep(2 * time.Millisecond) //clock:ok the scenario: a computation that holds the lease a while
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

// TestUntakeQueuesATaskAgain: a task taken is not waiting; untaken (its
// new generation published) it is waiting again, and still done if it
// was; reopened (reissued after Redis lost its result) it is not done
// either. Reissues are counted per task.
func TestUntakeQueuesATaskAgain(t *testing.T) {
	t.Parallel()
	s := runstate.New(redistest.Start(t).Client(t))
	ctx := context.Background()
	r := runstate.Round{Run: "run", Example: "ex", Agent: "toy"}
	tasks := []*message.Task{{Run: "run", Example: "ex", Agent: "toy", Task: agent.Task{ID: "a", Kind: "answer", Slots: []int{0}}},
		{Run: "run", Example: "ex", Agent: "toy", Task: agent.Task{ID: "b", Kind: "answer", Slots: []int{1}}}}
	if err := s.Open(ctx, "run", "ex", "toy", 0, 2, tasks); err != nil {
		t.Fatal(err)
	}
	waiting := func() string {
		w, err := s.Waiting(ctx, r)
		if err != nil {
			t.Fatal(err)
		}
		return fmt.Sprint(w)
	}
	for _, id := range []string{"a", "b"} {
		if _, err := s.Take(ctx, r, id, time.Now().Add(time.Minute)); err != nil {
			t.Fatal(err)
		}
	}
	if err := s.MarkDone(ctx, "run", "ex", "toy", "b"); err != nil {
		t.Fatal(err)
	}
	if w := waiting(); w != "[]" {
		t.Fatalf("waiting %s with every task taken", w)
	}
	if err := s.Untake(ctx, "run", "ex", "toy", false, "a"); err != nil {
		t.Fatal(err)
	}
	if w := waiting(); w != "[a]" {
		t.Errorf("waiting %s after a was untaken, want [a]", w)
	}
	if err := s.Untake(ctx, "run", "ex", "toy", true, "b"); err != nil {
		t.Fatal(err)
	}
	if done, err := s.Done(ctx, "run", "ex", "toy", "b"); err != nil || done {
		t.Errorf("b done %v (%v) after it was reopened", done, err)
	}
	if w := waiting(); w != "[a b]" {
		t.Errorf("waiting %s after b was reopened, want [a b]", w)
	}
	for range 2 {
		if _, err := s.CountReissue(ctx, "run", "ex", "toy", "b"); err != nil {
			t.Fatal(err)
		}
	}
	if n, err := s.Reissues(ctx, "run", "ex", "toy"); err != nil || fmt.Sprint(n) != "map[b:2]" {
		t.Errorf("reissues %v (%v), want map[b:2]", n, err)
	}
}

// TestBatchReadsMatchOneByOne: Metas and Currents, which read a whole
// run's examples a thousand to a round trip, say what Meta and Current
// say of each, across a chunk boundary, and leave out (Metas) or give -1
// (Currents) for examples never published or opened.
func TestBatchReadsMatchOneByOne(t *testing.T) {
	t.Parallel()
	s := runstate.New(redistest.Start(t).Client(t))
	ctx := context.Background()
	var ids []string
	published := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	for i := range 1203 {
		id := fmt.Sprintf("ex%04d", i)
		ids = append(ids, id)
		if i%3 == 0 {
			continue // never published
		}
		if err := s.SetMeta(ctx, "run", id, runstate.ExampleMeta{Warehouse: fmt.Sprintf("wh%d", i%5), Published: published.Add(time.Duration(i) * time.Second)}); err != nil {
			t.Fatal(err)
		}
		if err := s.Open(ctx, "run", id, "agent", i%4, 1, nil); err != nil {
			t.Fatal(err)
		}
	}
	metas, err := s.Metas(ctx, "run", ids)
	if err != nil {
		t.Fatal(err)
	}
	currents, err := s.Currents(ctx, "run", "agent", ids)
	if err != nil {
		t.Fatal(err)
	}
	if len(currents) != len(ids) {
		t.Fatalf("Currents gave %d examples, want %d", len(currents), len(ids))
	}
	for _, id := range ids {
		want, err := s.Meta(ctx, "run", id)
		got, ok := metas[id]
		switch {
		case err != nil && ok:
			t.Fatalf("%s: Metas gave %+v, Meta says %v", id, got, err)
		case err == nil && (!ok || got.Warehouse != want.Warehouse || !got.Published.Equal(want.Published)):
			t.Fatalf("%s: Metas gave %+v (present %v), Meta %+v", id, got, ok, want)
		}
		cur, err := s.Current(ctx, "run", id, "agent")
		if err != nil {
			t.Fatal(err)
		}
		if currents[id] != cur {
			t.Fatalf("%s: Currents gave round %d, Current %d", id, currents[id], cur)
		}
	}
	if got, want := len(metas), 1203-401; got != want {
		t.Fatalf("Metas gave %d examples, want the %d published", got, want)
	}
}
