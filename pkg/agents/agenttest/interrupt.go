package agenttest

import (
	"context"
	"errors"
	"sync"

	"github.com/quorumsql/quorum/pkg/llm"
	"github.com/quorumsql/quorum/pkg/runtime/agent"
	"github.com/quorumsql/quorum/pkg/runtime/local"
)

// ErrInterrupted is the error of the call an Interrupter stops: the task
// fails as one whose worker died at that call, and is delivered again
// (local retries it, as the queue redelivers it).
var ErrInterrupted = errors.New("agenttest: the worker was stopped at this call")

// Interrupter forwards calls to a client and stops one: the call after
// the first N that Match (every call when Match is nil) fails once, without
// reaching the client, with ErrInterrupted. It counts the matching calls
// the client answered before and after the stop, so a test sees whether a
// redelivered chain continued (after = what was left) or started again.
type Interrupter struct {
	Client llm.Client
	N      int
	Match  func(llm.Request) bool

	mu            sync.Mutex
	stopped       bool
	before, after int
}

// Chat implements llm.Client.
func (i *Interrupter) Chat(ctx context.Context, req llm.Request) (*llm.Response, error) {
	if i.Match == nil || i.Match(req) {
		i.mu.Lock()
		switch {
		case !i.stopped && i.before == i.N:
			i.stopped = true
			i.mu.Unlock()
			return nil, ErrInterrupted
		case i.stopped:
			i.after++
		default:
			i.before++
		}
		i.mu.Unlock()
	}
	return i.Client.Chat(ctx, req)
}

// Calls are the matching calls answered before and after the stop, and
// whether the stop happened.
func (i *Interrupter) Calls() (before, after int, stopped bool) {
	i.mu.Lock()
	defer i.mu.Unlock()
	return i.before, i.after, i.stopped
}

// Checkpoints lists the checkpoints c's store keeps (saved and not
// dropped) and counts every save made; c is a Context of this package
// (its store is local's).
func Checkpoints(c *agent.Context) (names []string, saves int) {
	s, ok := c.Store.(*local.Store)
	if !ok {
		return nil, 0
	}
	return s.Checkpoints()
}
