package llm

import (
	"context"
	"sync"
)

// Meter adds up the usage of every call answered under a context, whatever
// the caller then does with it: a task stopped half-way (its question
// cancelled) still accounts for the calls the provider answered, which
// the agent's own ledger drops with the step that failed. A meter made by
// NewMeter also has hooks around each call; the zero Meter has none.
type Meter struct {
	mu    sync.Mutex
	calls int
	usage Usage
	hooks MeterHooks
}

// MeterHooks are what a meter asks before each call under its context is
// sent, and tells once each is answered: a caller that caps what a piece
// of work may spend (a question's token reservation) stops it between
// calls, wherever they are made.
type MeterHooks struct {
	// Before, when set, is asked before each attempt of a call is sent,
	// after any wait for the quota: an error fails the call (a
	// *CallError wrapping it) without sending it.
	Before func(ctx context.Context) error
	// After, when set, is told the usage of each answered call once the
	// meter has counted it, on the calling goroutine, before the call
	// returns: what it does (cancel the caller's context, say) is done
	// before the caller can make another call.
	After func(Usage)
}

// NewMeter returns a meter with hooks.
func NewMeter(h MeterHooks) *Meter { return &Meter{hooks: h} }

type meterKey struct{}

// WithMeter returns ctx whose calls m counts.
func WithMeter(ctx context.Context, m *Meter) context.Context {
	return context.WithValue(ctx, meterKey{}, m)
}

// Total returns the calls answered and their usage.
func (m *Meter) Total() (int, Usage) {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.calls, m.usage
}

func meter(ctx context.Context, u Usage) {
	m, ok := ctx.Value(meterKey{}).(*Meter)
	if !ok {
		return
	}
	m.mu.Lock()
	m.calls++
	m.usage.Add(u)
	m.mu.Unlock()
	if m.hooks.After != nil {
		m.hooks.After(u)
	}
}

// meterBefore asks ctx's meter whether a call may be sent.
func meterBefore(ctx context.Context) error {
	if m, ok := ctx.Value(meterKey{}).(*Meter); ok && m.hooks.Before != nil {
		return m.hooks.Before(ctx)
	}
	return nil
}
