package queue

import (
	"context"
	"testing"
	"testing/synctest"
)

// TestSlotsComeBackFirst: a handler back from a wait takes the next freed
// slot before the fetch loop does, a handler whose wait ended with its
// context passes on a slot handed to it, and room bounds what is held. In
// a synctest bubble: synctest.Wait returns once a is blocked coming back.
func TestSlotsComeBackFirst(t *testing.T) {
	synctest.Test(t, testSlotsComeBackFirst)
}

func testSlotsComeBackFirst(t *testing.T) {
	s := newSlots(1, 3)
	if got := s.take(5); got != 1 {
		t.Fatalf("take with 1 slot and room 3: %d, want 1", got)
	}
	a := &handlerSlot{s: s, running: true}
	a.Leave() // a waits for the LLM
	if got := s.take(5); got != 1 {
		t.Fatalf("take once a's slot is left: %d, want 1", got)
	}
	b := &handlerSlot{s: s, running: true}
	// a's reply is in while b runs: a waits for b's slot.
	back := make(chan error, 1)
	go func() { back <- a.Return(context.Background()) }()
	synctest.Wait()
	s.mu.Lock()
	waiting := len(s.back)
	s.mu.Unlock()
	if waiting != 1 {
		t.Fatalf("a blocked coming back with %d handlers queued to come back, want 1 (itself)", waiting)
	}
	b.Leave()
	if err := <-back; err != nil {
		t.Fatalf("a coming back: %v", err)
	}
	if got := s.take(5); got != 0 {
		t.Fatalf("take while a runs in b's former slot: %d, want 0", got)
	}
	// b's wait ends with its context: it gets no slot and takes none.
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if err := b.Return(ctx); err == nil {
		t.Fatal("b came back with a cancelled context and no free slot")
	}
	b.done()
	a.done()
	s.mu.Lock()
	free, room := s.free, s.room
	s.mu.Unlock()
	if free != 1 || room != 3 {
		t.Errorf("after both ended: %d free slots and room %d, want 1 and 3", free, room)
	}
	// Room bounds what is held: three holders, none running, leave no room.
	for range 3 {
		if got := s.take(1); got != 1 {
			t.Fatalf("take with room left: %d, want 1", got)
		}
		(&handlerSlot{s: s, running: true}).Leave()
	}
	if got := s.take(1); got != 0 {
		t.Errorf("take with 3 held of room 3: %d, want 0", got)
	}
}
