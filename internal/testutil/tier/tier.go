// Package tier sorts tests into the targets that run them: `make check`
// runs `go test -short`, which skips every test that starts a server, a
// process, a browser or a long experiment; `make test` runs them all.
package tier

import "testing"

// Servers skips the test under -short: it starts what (redis-server,
// NATS, a cluster, Chromium, a built binary...), which make check leaves
// to make test.
func Servers(t testing.TB, what string) {
	if testing.Short() {
		t.Helper()
		t.Skipf("starts %s: skipped under -short (make check); make test runs it", what)
	}
}
