// Package service is the shape of every background loop of a quorum
// process: a component with Start(ctx), which starts its goroutines, and
// Stop, which ends them and returns only once they have ended, so that
// nothing a component started outlives it (River's startstop package is
// the model, reduced to what quorum uses).
//
// A component embeds a Loop and calls Loop.Go from its Start; Stop comes
// with the Loop. Components that hold others (the voter's three loops)
// start them in order and stop them in reverse.
package service

import (
	"context"
	"errors"
	"sync"
)

// Service is a background component.
type Service interface {
	// Start starts the component's goroutines; they end when ctx ends or
	// at Stop.
	Start(ctx context.Context) error
	// Stop ends the component's goroutines and returns once they have
	// ended. Stopping a component not started, or stopped, does nothing.
	Stop()
}

// ErrStarted is returned by Start on a component already started.
var ErrStarted = errors.New("service: already started")

// Loop runs one function in its own goroutine, from Go until Stop or until
// the function returns. The zero Loop is ready to use; a stopped Loop may
// be started again.
type Loop struct {
	mu sync.Mutex
	// cancel is set while started (until Stop), even once the function
	// returned on its own: Go refuses to start it twice.
	cancel context.CancelFunc
	// done is the last start's, closed once its goroutine has ended.
	done chan struct{}
	err  error
}

// Go starts run in the loop's goroutine, with a context that ends at Stop
// or when ctx ends.
func (l *Loop) Go(ctx context.Context, run func(ctx context.Context) error) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.cancel != nil {
		return ErrStarted
	}
	ctx, cancel := context.WithCancel(ctx)
	done := make(chan struct{})
	l.cancel, l.done, l.err = cancel, done, nil
	go func() {
		err := run(ctx)
		l.mu.Lock()
		l.err = err
		l.mu.Unlock()
		close(done)
	}()
	return nil
}

// Stop cancels the loop's context and waits until its goroutine has
// ended.
func (l *Loop) Stop() {
	l.mu.Lock()
	cancel, done := l.cancel, l.done
	l.cancel = nil
	l.mu.Unlock()
	if cancel == nil {
		return
	}
	cancel()
	<-done
}

// Done is closed once the loop's goroutine has ended, by Stop or on its
// own; nil (never ready) before the first Go.
func (l *Loop) Done() <-chan struct{} {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.done
}

// Err is what the loop's function returned, once Done is closed.
func (l *Loop) Err() error {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.err
}

// Func is a component running one function: Start runs Run in its own
// goroutine until Stop.
type Func struct {
	Run func(ctx context.Context) error
	Loop
}

// Start runs f.Run.
func (f *Func) Start(ctx context.Context) error { return f.Go(ctx, f.Run) }

// Group is components started in order and stopped in reverse order.
type Group []Service

// Start starts each component in turn; when one fails, those started are
// stopped again.
func (g Group) Start(ctx context.Context) error {
	for i, s := range g {
		if err := s.Start(ctx); err != nil {
			g[:i].Stop()
			return err
		}
	}
	return nil
}

// Stop stops each component, the last started first.
func (g Group) Stop() {
	for i := len(g) - 1; i >= 0; i-- {
		g[i].Stop()
	}
}
