// Package redistest starts real redis-server processes for tests. There are
// no in-memory fakes: limiter scripts and voter state run against the real
// server, as in production.
package redistest

import (
	"errors"
	"testing"

	"github.com/redis/go-redis/v9"

	"github.com/quorumsql/quorum/pkg/localredis"
)

// Server is a running redis-server.
type Server struct {
	*localredis.Server
}

// Client returns a new client for the server, closed at cleanup.
func (s *Server) Client(t testing.TB) *redis.Client {
	t.Helper()
	c := redis.NewClient(&redis.Options{Addr: s.Addr, ContextTimeoutEnabled: true})
	t.Cleanup(func() { c.Close() })
	return c
}

// Start launches redis-server on a free loopback port with persistence off
// and stops it when the test ends.
func Start(t testing.TB) *Server {
	t.Helper()
	s, err := localredis.Start(localredis.Options{Dir: t.TempDir()})
	if errors.Is(err, localredis.ErrNotInstalled) {
		t.Fatalf("%v", err)
	}
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(s.Stop)
	return &Server{s}
}
