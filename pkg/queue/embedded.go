package queue

import (
	"fmt"
	"time"

	"github.com/nats-io/nats-server/v2/server"
)

// Embedded is a NATS server with JetStream running inside this process, for
// `quorum run` on one machine and for tests.
type Embedded struct {
	srv *server.Server
}

// StartEmbedded starts a JetStream-enabled server storing in dir, on
// 127.0.0.1 (port -1 picks a free one).
func StartEmbedded(dir string, port int) (*Embedded, error) {
	srv, err := server.NewServer(&server.Options{Host: "127.0.0.1", Port: port, JetStream: true, StoreDir: dir,
		NoLog: true, NoSigs: true, MaxPayload: 8 << 20})
	if err != nil {
		return nil, fmt.Errorf("embedded NATS: %w", err)
	}
	go srv.Start()
	if !srv.ReadyForConnections(10 * time.Second) {
		srv.Shutdown()
		return nil, fmt.Errorf("embedded NATS did not start within 10s (store %s)", dir)
	}
	return &Embedded{srv: srv}, nil
}

// URL is the client URL.
func (e *Embedded) URL() string { return e.srv.ClientURL() }

// Shutdown stops the server and waits.
func (e *Embedded) Shutdown() {
	e.srv.Shutdown()
	e.srv.WaitForShutdown()
}
