// Package natstest starts a real NATS server with JetStream inside the test
// process (temp store, random port), stopped at cleanup.
package natstest

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

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

// Consumers are the names of the consumers on quorum's task stream that
// start with prefix, read from JetStream itself.
func Consumers(t testing.TB, js jetstream.JetStream, prefix string) map[string]bool {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	st, err := js.Stream(ctx, queue.Stream)
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]bool{}
	names := st.ConsumerNames(ctx)
	for n := range names.Name() {
		if strings.HasPrefix(n, prefix) {
			out[n] = true
		}
	}
	if err := names.Err(); err != nil {
		t.Fatal(err)
	}
	return out
}
