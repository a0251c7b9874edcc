package serve

import (
	"context"
	"net"
	"net/http"

	"github.com/quorumsql/quorum/internal/service"
)

// Listener is the component serving the API, the web page and the health
// endpoints on ln from Start until Stop. Stop ends the event streams (a
// client reconnects to another process, or to this one's next life), lets
// other requests in flight finish for up to 2 s, and returns once the
// server has stopped.
func (s *Server) Listener(ln net.Listener) *service.HTTP {
	return &service.HTTP{Server: s.HTTPServer(), Listener: ln}
}

// HTTPServer is an http.Server for Handler with the limits' timeouts.
// ReadTimeout stays unset: it would also end event streams (net/http
// cancels a request whose connection read deadline passes), so bodies
// get their own deadline per request instead. Its event streams end when
// its Shutdown begins.
func (s *Server) HTTPServer() *http.Server {
	l := s.cfg.HTTP
	closing, closeStreams := context.WithCancel(context.Background())
	hs := &http.Server{Handler: s.Handler(), ReadHeaderTimeout: l.ReadHeaderTimeout, WriteTimeout: l.WriteTimeout, IdleTimeout: l.IdleTimeout,
		BaseContext: func(net.Listener) context.Context {
			return context.WithValue(context.Background(), streamsKey{}, closing.Done())
		}}
	hs.RegisterOnShutdown(closeStreams)
	return hs
}

type streamsKey struct{}

// closingStreams is closed when the server serving the request shuts down
// (nil, never closed, under a server that did not set it).
func closingStreams(ctx context.Context) <-chan struct{} {
	c, _ := ctx.Value(streamsKey{}).(<-chan struct{})
	return c
}
