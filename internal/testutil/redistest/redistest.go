// Package redistest starts real redis-server processes for tests. There are
// no in-memory fakes: limiter scripts and voter state run against the real
// server, as in production.
package redistest

import (
	"errors"
	"testing"

	"github.com/redis/go-redis/v9"

	"github.com/quorumsql/quorum/internal/localredis"
	"github.com/quorumsql/quorum/internal/testutil/tier"
)

// Server is a running redis-server.
type Server struct {
	*localredis.Server
}

// Client returns a new client for the server, closed at cleanup. It logs
// in as Start checked the server (the default user, or the first ACL
// user), over TLS when the server speaks it.
func (s *Server) Client(t testing.TB) *redis.Client {
	t.Helper()
	c := redis.NewClient(s.ClientOptions())
	t.Cleanup(func() { c.Close() })
	return c
}

// Start launches redis-server on a free loopback port with persistence off
// and stops it when the test ends.
func Start(t testing.TB) *Server {
	t.Helper()
	return StartWith(t, localredis.Options{})
}

// StartWith is Start with options: ACL users, TLS, a password. Dir
// defaults to a temporary directory. The test is skipped when the options
// ask for TLS and redis-server was built without it.
func StartWith(t testing.TB, opt localredis.Options) *Server {
	t.Helper()
	tier.Servers(t, "redis-server")
	if opt.Dir == "" {
		opt.Dir = t.TempDir()
	}
	s, err := localredis.Start(opt)
	if errors.Is(err, localredis.ErrNoTLS) {
		t.Skipf("TLS tests need a redis-server with TLS: %v", err)
	}
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(s.Stop)
	return &Server{s}
}
