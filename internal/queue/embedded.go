package queue

import (
	"fmt"
	"net/url"
	"strings"
	"time"

	"github.com/nats-io/nats-server/v2/server"
)

// Embedded is a NATS server with JetStream running inside this process, for
// `quorum run` on one machine and for tests.
type Embedded struct {
	srv        *server.Server
	user, pass string
}

// StartEmbedded starts a JetStream-enabled server storing in dir, on
// 127.0.0.1 (port -1 picks a free one).
//
// With a user and password, clients must present them (URL() carries
// them): on a shared machine, anyone who can reach the loopback port could
// otherwise publish tasks or forged answers.
func StartEmbedded(dir string, port int, userPass ...string) (*Embedded, error) {
	opts := &server.Options{Host: "127.0.0.1", Port: port, JetStream: true, StoreDir: dir,
		NoLog: true, NoSigs: true, MaxPayload: 8 << 20}
	if len(userPass) == 2 {
		opts.Username, opts.Password = userPass[0], userPass[1]
	}
	srv, err := server.NewServer(opts)
	if err != nil {
		return nil, fmt.Errorf("embedded NATS: %w", err)
	}
	go srv.Start()
	if !srv.ReadyForConnections(10 * time.Second) {
		srv.Shutdown()
		return nil, fmt.Errorf("embedded NATS did not start within 10s (store %s)", dir)
	}
	return &Embedded{srv: srv, user: opts.Username, pass: opts.Password}, nil
}

// URL is the client URL, with the credentials when the server has them.
func (e *Embedded) URL() string {
	u := e.srv.ClientURL()
	if e.user == "" {
		return u
	}
	return strings.Replace(u, "nats://", "nats://"+url.UserPassword(e.user, e.pass).String()+"@", 1)
}

// Shutdown stops the server and waits.
func (e *Embedded) Shutdown() {
	e.srv.Shutdown()
	e.srv.WaitForShutdown()
}
