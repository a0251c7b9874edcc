package service

import (
	"context"
	"errors"
	"net"
	"net/http"
	"time"
)

// HTTP serves Server on Listener from Start until Stop: Stop shuts the
// server down (requests in flight get ShutdownTimeout, then their
// connections are closed) and returns once Serve has returned.
type HTTP struct {
	Server   *http.Server
	Listener net.Listener
	// ShutdownTimeout is how long requests in flight may finish at Stop
	// (default 2s).
	ShutdownTimeout time.Duration
	Loop
}

// Start serves in the component's goroutine.
func (h *HTTP) Start(ctx context.Context) error {
	return h.Go(ctx, h.serve)
}

// Addr is the address the server listens on.
func (h *HTTP) Addr() net.Addr { return h.Listener.Addr() }

func (h *HTTP) serve(ctx context.Context) error {
	shut := make(chan struct{})
	stop := context.AfterFunc(ctx, func() {
		defer close(shut)
		timeout := h.ShutdownTimeout
		if timeout <= 0 {
			timeout = 2 * time.Second
		}
		sctx, cancel := context.WithTimeout(context.Background(), timeout)
		defer cancel()
		if h.Server.Shutdown(sctx) != nil {
			_ = h.Server.Close()
		}
	})
	err := h.Server.Serve(h.Listener)
	if stop() {
		// Serve failed on its own: nothing is shutting it down.
		_ = h.Server.Close()
	} else {
		<-shut // Serve returns as the shutdown begins: wait for its end
	}
	if errors.Is(err, http.ErrServerClosed) {
		return nil
	}
	return err
}
