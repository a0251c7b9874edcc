package llm

import (
	"context"
	"sync"
)

// Meter adds up the usage of every call answered under a context, whatever
// the caller then does with it: a task stopped half-way (its question
// cancelled) still accounts for the calls the provider answered, which
// the agent's own ledger drops with the step that failed.
type Meter struct {
	mu    sync.Mutex
	calls int
	usage Usage
}

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
	if m, ok := ctx.Value(meterKey{}).(*Meter); ok {
		m.mu.Lock()
		m.calls++
		m.usage.Add(u)
		m.mu.Unlock()
	}
}
