// Package slot lets work give back the execution slot it runs in while it
// waits. A worker runs few tasks at once (its slots guard the process's
// CPU and memory) but may hold many: a task waiting for an LLM reply, for
// the LLM quota or for a warehouse's gate does nothing a slot guards, so
// it leaves its slot to another task and takes one again when the wait is
// over. The quotas, kept cluster-wide, are then what bounds throughput.
//
// Code that waits calls Idle; a context without a slot (a test, quorum
// solve) makes Idle a no-op.
package slot

import (
	"context"
)

// Slot is the execution slot a task runs in.
type Slot interface {
	// Leave gives the slot back while the task waits.
	Leave()
	// Return takes a slot again; it fails only when ctx ends first.
	Return(ctx context.Context) error
}

type key struct{}

// With returns ctx carrying s.
func With(ctx context.Context, s Slot) context.Context {
	return context.WithValue(ctx, key{}, s)
}

// Idle gives ctx's slot back for a wait: the wait runs under the returned
// context (which carries no slot, so waits nested in it do not give it
// twice), and back takes a slot again once it is over. back returns when
// a slot is taken or ctx has ended; the task then ends soon anyway.
func Idle(ctx context.Context) (wait context.Context, back func()) {
	s, ok := ctx.Value(key{}).(Slot)
	if !ok || s == nil {
		return ctx, func() {}
	}
	s.Leave()
	return context.WithValue(ctx, key{}, nil), func() { _ = s.Return(ctx) }
}
