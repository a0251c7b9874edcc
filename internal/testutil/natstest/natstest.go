// Package natstest starts a real NATS server with JetStream inside the test
// process (temp store, random port), stopped at cleanup.
package natstest

import (
	"testing"

	"github.com/quorumsql/quorum/internal/queue"
	"github.com/quorumsql/quorum/internal/testutil/tier"
)

// Start returns a running server.
func Start(t testing.TB) *queue.Embedded {
	t.Helper()
	tier.Servers(t, "a NATS server")
	e, err := queue.StartEmbedded(t.TempDir(), -1)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(e.Shutdown)
	return e
}
