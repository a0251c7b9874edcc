package ratelimit

import (
	"container/list"
	"context"
	"sync"
)

// lines are a process's queues of callers waiting on the same limits, one
// per group and priority. Only a line's head asks Redis: callers told "not
// before T" all wake at T, one is admitted and the rest ask again one
// emission later, so N callers polling a saturated quota cost N Redis
// calls per admission. In a line they cost one, and this process's callers
// are admitted in the order they came (across processes the heads race).
type lines struct {
	mu sync.Mutex
	m  map[string]*list.List // of chan struct{}; the front is the head
}

// join puts a caller at the back of key's line. Its turn comes (the channel
// is closed) once it is the head; leave takes it out, head or not, and
// hands the turn to the next caller.
func (ls *lines) join(key string) (turn <-chan struct{}, leave func()) {
	ls.mu.Lock()
	defer ls.mu.Unlock()
	if ls.m == nil {
		ls.m = map[string]*list.List{}
	}
	q := ls.m[key]
	if q == nil {
		q = list.New()
		ls.m[key] = q
	}
	ch := make(chan struct{})
	e := q.PushBack(ch)
	if q.Len() == 1 {
		close(ch)
	}
	var once sync.Once
	return ch, func() {
		once.Do(func() {
			ls.mu.Lock()
			defer ls.mu.Unlock()
			head := q.Front() == e
			q.Remove(e)
			if q.Len() == 0 {
				delete(ls.m, key)
				return
			}
			if head {
				close(q.Front().Value.(chan struct{}))
			}
		})
	}
}

// wait joins key's line and returns once it is the caller's turn, with the
// leave that must follow; an error when ctx ended first (it has left).
func (ls *lines) wait(ctx context.Context, key string) (leave func(), err error) {
	turn, leave := ls.join(key)
	select {
	case <-turn:
		return leave, nil
	case <-ctx.Done():
		leave()
		return nil, ctx.Err()
	}
}
