package queue

import (
	"context"
	"sync"
)

// slots are a worker loop's execution slots and the room for the messages
// it holds. A handler holds a message from fetch to ack and runs in a slot,
// except while it waits (slot.Idle): then its slot runs another message,
// so a loop holds up to room messages but runs at most its concurrency at
// once. A handler coming back from a wait takes the next freed slot before
// a new message is fetched into it: work under way finishes first.
type slots struct {
	mu   sync.Mutex
	free int // slots no handler runs in
	room int // messages the loop may still take
	// back are the handlers waiting to come back, first first; while any
	// wait, free is 0 (a freed slot goes straight to the first).
	back []chan struct{}
	// wake tells the fetch loop a slot or room has freed.
	wake chan struct{}
}

func newSlots(concurrency, held int) *slots {
	return &slots{free: concurrency, room: max(held, concurrency), wake: make(chan struct{}, 1)}
}

func (s *slots) notify() {
	select {
	case s.wake <- struct{}{}:
	default:
	}
}

// take reserves a slot and room for up to n new messages, none while a
// handler waits to come back.
func (s *slots) take(n int) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	n = min(n, s.free, s.room)
	if n <= 0 || len(s.back) > 0 {
		return 0
	}
	s.free -= n
	s.room -= n
	return n
}

// untake gives back what take reserved for messages the fetch did not bring.
func (s *slots) untake(n int) {
	for range n {
		s.release()
		s.leave()
	}
}

// release frees a slot: to the first handler waiting to come back, else
// for a new message.
func (s *slots) release() {
	s.mu.Lock()
	defer s.mu.Unlock()
	if len(s.back) > 0 {
		close(s.back[0])
		s.back = s.back[1:]
		return
	}
	s.free++
	s.notify()
}

// leave frees a message's room.
func (s *slots) leave() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.room++
	s.notify()
}

// acquire waits for a slot for a handler coming back from a wait.
func (s *slots) acquire(ctx context.Context) error {
	s.mu.Lock()
	if s.free > 0 && len(s.back) == 0 {
		s.free--
		s.mu.Unlock()
		return nil
	}
	ch := make(chan struct{})
	s.back = append(s.back, ch)
	s.mu.Unlock()
	select {
	case <-ch:
		return nil
	case <-ctx.Done():
	}
	s.mu.Lock()
	for i, c := range s.back {
		if c == ch {
			s.back = append(s.back[:i], s.back[i+1:]...)
			s.mu.Unlock()
			return context.Cause(ctx)
		}
	}
	s.mu.Unlock()
	// Handed a slot as ctx ended: pass it on.
	s.release()
	return context.Cause(ctx)
}

// handlerSlot is one handler's hold on a slot (slot.Slot). A task may
// wait in several goroutines at once: it runs in its slot again once the
// last wait is over.
type handlerSlot struct {
	s       *slots
	mu      sync.Mutex
	running bool
	idlers  int
}

// Leave implements slot.Slot.
func (h *handlerSlot) Leave() {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.idlers++
	if h.running {
		h.running = false
		h.s.release()
	}
}

// Return implements slot.Slot.
func (h *handlerSlot) Return(ctx context.Context) error {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.idlers--
	if h.idlers > 0 || h.running {
		return nil
	}
	if err := h.s.acquire(ctx); err != nil {
		return err
	}
	h.running = true
	return nil
}

// done frees the handler's slot, if it runs in one, and its room.
func (h *handlerSlot) done() {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.running {
		h.running = false
		h.s.release()
	}
	h.s.leave()
}
