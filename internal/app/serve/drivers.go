package serve

import (
	"context"
	"time"

	"go.uber.org/zap"
)

// The Server is a component: from Start until Stop it drives questions
// (Run), and Stop returns once every goroutine it started has ended — the
// loop adopting and settling questions, each question's driver (its
// coordinator, its lease's renewer) and each event feed's poller.

// Start drives questions in the server's own goroutine until Stop.
func (s *Server) Start(ctx context.Context) error { return s.loop.Go(ctx, s.Run) }

// Stop stops driving questions (those in flight stay pending for the next
// driver, this process's next life or another process) and waits until
// every driver and feed has stopped: their last records are written.
func (s *Server) Stop() {
	s.loop.Stop()
	s.Wait()
}

// Wait returns once every question this process drives, and every event
// feed it polls, has stopped (after Run's context ended): their last
// records and log lines are written.
func (s *Server) Wait() {
	s.drivers.Wait()
	s.pollers.Wait()
}

// Run drives questions until ctx ends: the ones this process accepts, and
// any accepted question whose driver died (its lease lapsed), this
// process's own previous life included.
func (s *Server) Run(ctx context.Context) error {
	s.mu.Lock()
	s.ctx = ctx
	s.mu.Unlock()
	t := time.NewTicker(2 * time.Second)
	defer t.Stop()
	for {
		s.adopt(ctx)
		s.settle(ctx)
		select {
		case <-ctx.Done():
			return nil
		case <-t.C:
		}
	}
}

// adopt starts every pending question no live process drives.
func (s *Server) adopt(ctx context.Context) {
	ids, err := s.store.pending(ctx)
	if err != nil {
		if ctx.Err() == nil {
			s.cfg.Log.Warn("listing pending questions", zap.Error(err))
		}
		return
	}
	for _, id := range ids {
		s.start(ctx, id)
	}
}
