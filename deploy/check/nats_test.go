package check

import (
	"context"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// The password the tests give nats.conf; the shape openssl rand -hex makes.
const natsPassword = "3e7a0c5b9d1f2e4a6c8b0d2f4a6c8e0b"

// startNATSConf starts nats-server with deploy/nats/nats.conf as compose
// does (QUORUM_NATS_PASSWORD in the environment), on a free port with a
// temporary store.
func startNATSConf(t *testing.T) *server.Server {
	t.Helper()
	t.Setenv("QUORUM_NATS_PASSWORD", natsPassword)
	opts, err := server.ProcessConfigFile("../nats/nats.conf")
	if err != nil {
		t.Fatal(err)
	}
	if opts.Port != 4222 || opts.HTTPPort != 8222 || !opts.JetStream {
		t.Errorf("nats.conf: port %d, monitoring %d, JetStream %v; compose and KEDA expect 4222, 8222, on", opts.Port, opts.HTTPPort, opts.JetStream)
	}
	opts.Port, opts.HTTPPort, opts.StoreDir = -1, 0, t.TempDir()
	opts.NoSigs, opts.NoLog = true, true
	s, err := server.NewServer(opts)
	if err != nil {
		t.Fatal(err)
	}
	go s.Start()
	if !s.ReadyForConnections(10 * time.Second) {
		t.Fatal("nats-server did not start")
	}
	t.Cleanup(s.Shutdown)
	return s
}

// TestNATSConfigRequiresLogin: the compose NATS lets in the user quorum
// with its password, with JetStream, and no one else.
func TestNATSConfigRequiresLogin(t *testing.T) {
	s := startNATSConf(t)
	url := s.ClientURL()
	for _, tc := range []struct {
		name string
		opts []nats.Option
	}{
		{"no login", nil},
		{"wrong password", []nats.Option{nats.UserInfo("quorum", "wrong")}},
		{"other user", []nats.Option{nats.UserInfo("admin", natsPassword)}},
	} {
		nc, err := nats.Connect(url, append(tc.opts, nats.MaxReconnects(0))...)
		if err == nil {
			nc.Close()
			t.Errorf("%s: connected", tc.name)
		} else if !strings.Contains(strings.ToLower(err.Error()), "authorization violation") {
			t.Errorf("%s: %v, want an authorization violation", tc.name, err)
		}
	}
	// As the roles do: the credentials in the URL.
	nc, err := nats.Connect(strings.Replace(url, "nats://", "nats://quorum:"+natsPassword+"@", 1))
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if _, err := js.AccountInfo(ctx); err != nil {
		t.Fatalf("JetStream: %v", err)
	}
}

// TestNATSConfigWithoutPassword: without QUORUM_NATS_PASSWORD the
// configuration does not load, so the server does not start open.
func TestNATSConfigWithoutPassword(t *testing.T) {
	t.Setenv("QUORUM_NATS_PASSWORD", "")
	os.Unsetenv("QUORUM_NATS_PASSWORD")
	_, err := server.ProcessConfigFile("../nats/nats.conf")
	if err == nil || !strings.Contains(err.Error(), "QUORUM_NATS_PASSWORD") {
		t.Fatalf("nats.conf without QUORUM_NATS_PASSWORD: %v, want an error naming it", err)
	}
}
