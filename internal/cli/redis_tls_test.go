package cli

import (
	"bufio"
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/spf13/cobra"

	"github.com/quorumsql/quorum/internal/localredis"
	"github.com/quorumsql/quorum/internal/ratelimit"
	"github.com/quorumsql/quorum/internal/runtime/cluster"
	"github.com/quorumsql/quorum/internal/runtime/runstate"
	"github.com/quorumsql/quorum/internal/testutil/natstest"
	"github.com/quorumsql/quorum/internal/testutil/redistest"
	"github.com/quorumsql/quorum/internal/testutil/tier"
	"github.com/quorumsql/quorum/pkg/llm"
)

// pki is a throwaway CA with a server and a client certificate, and a
// second CA with a client certificate the server must not accept. Every
// file is PEM in a temporary directory.
type pki struct {
	ca, serverCert, serverKey, clientCert, clientKey string
	otherCA, otherClientCert, otherClientKey         string
	// client is how the test harness itself reaches the server.
	client *tls.Config
}

type issuer struct {
	cert *x509.Certificate
	key  *ecdsa.PrivateKey
}

// serial is a random certificate serial number.
func serial(t *testing.T) *big.Int {
	t.Helper()
	n, err := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 62))
	if err != nil {
		t.Fatal(err)
	}
	return n
}

func newKey(t *testing.T) *ecdsa.PrivateKey {
	t.Helper()
	k, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	return k
}

// newCA writes a self-signed CA certificate to dir/name.pem.
func newCA(t *testing.T, dir, name string) (issuer, string) {
	t.Helper()
	key := newKey(t)
	tmpl := &x509.Certificate{SerialNumber: serial(t), Subject: pkix.Name{CommonName: name},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		IsCA: true, BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign | x509.KeyUsageDigitalSignature}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(dir, name+".pem")
	writePEM(t, path, "CERTIFICATE", der)
	return issuer{cert, key}, path
}

// issue writes a certificate signed by ca, and its key, to
// dir/name.pem and dir/name-key.pem.
func (ca issuer) issue(t *testing.T, dir, name string, usage x509.ExtKeyUsage, ips ...net.IP) (certPath, keyPath string) {
	t.Helper()
	key := newKey(t)
	tmpl := &x509.Certificate{SerialNumber: serial(t), Subject: pkix.Name{CommonName: name},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		KeyUsage: x509.KeyUsageDigitalSignature, ExtKeyUsage: []x509.ExtKeyUsage{usage}, IPAddresses: ips}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca.cert, &key.PublicKey, ca.key)
	if err != nil {
		t.Fatal(err)
	}
	kder, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		t.Fatal(err)
	}
	certPath, keyPath = filepath.Join(dir, name+".pem"), filepath.Join(dir, name+"-key.pem")
	writePEM(t, certPath, "CERTIFICATE", der)
	writePEM(t, keyPath, "PRIVATE KEY", kder)
	return certPath, keyPath
}

func writePEM(t *testing.T, path, typ string, der []byte) {
	t.Helper()
	if err := os.WriteFile(path, pem.EncodeToMemory(&pem.Block{Type: typ, Bytes: der}), 0o600); err != nil {
		t.Fatal(err)
	}
}

func newPKI(t *testing.T) *pki {
	t.Helper()
	dir := t.TempDir()
	p := &pki{}
	ca, caPath := newCA(t, dir, "ca")
	other, otherPath := newCA(t, dir, "other-ca")
	p.ca, p.otherCA = caPath, otherPath
	// The server's certificate names 127.0.0.1 only: a client dialing
	// "localhost" must refuse it.
	p.serverCert, p.serverKey = ca.issue(t, dir, "server", x509.ExtKeyUsageServerAuth, net.IPv4(127, 0, 0, 1))
	p.clientCert, p.clientKey = ca.issue(t, dir, "client", x509.ExtKeyUsageClientAuth)
	p.otherClientCert, p.otherClientKey = other.issue(t, dir, "other-client", x509.ExtKeyUsageClientAuth)
	cert, err := tls.LoadX509KeyPair(p.clientCert, p.clientKey)
	if err != nil {
		t.Fatal(err)
	}
	roots := x509.NewCertPool()
	roots.AddCert(ca.cert)
	p.client = &tls.Config{RootCAs: roots, Certificates: []tls.Certificate{cert}, ServerName: "127.0.0.1", MinVersion: tls.VersionTLS12}
	return p
}

// roleACL is the rules of the quorum user in deploy/redis/users.acl: the
// ACL the deployments give the roles.
func roleACL(t *testing.T) string {
	t.Helper()
	path := filepath.Join("..", "..", "deploy", "redis", "users.acl")
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if rules, ok := strings.CutPrefix(strings.TrimSpace(sc.Text()), "user quorum "); ok {
			return rules
		}
	}
	t.Fatalf("%s defines no user quorum", path)
	return ""
}

const aclPassword = "s3cret-Redis-ACL"

// startTLSRedis starts redis-server speaking only TLS, requiring client
// certificates from the pki's CA, with the default user off and the
// roles' ACL user quorum.
func startTLSRedis(t *testing.T, p *pki) (*redistest.Server, string) {
	t.Helper()
	srv := redistest.StartWith(t, localredis.Options{
		Users: []localredis.User{{Name: "quorum", Password: aclPassword, Rules: roleACL(t)}},
		TLS:   &localredis.TLS{CertFile: p.serverCert, KeyFile: p.serverKey, CAFile: p.ca, Client: p.client},
	})
	_, port, _ := net.SplitHostPort(srv.Addr)
	return srv, port
}

// roleFlags parses args as a role's command line does, with none of the
// flags' environment variables set.
func roleFlags(t *testing.T, args ...string) *clusterFlags {
	t.Helper()
	for _, k := range []string{"QUORUM_NATS_URL", "QUORUM_REDIS_URL", "QUORUM_REDIS_TLS_CA", "QUORUM_REDIS_TLS_CERT", "QUORUM_REDIS_TLS_KEY"} {
		t.Setenv(k, "")
	}
	cmd := &cobra.Command{Use: "voter"}
	f := &clusterFlags{}
	f.register(cmd, true)
	if err := cmd.ParseFlags(args); err != nil {
		t.Fatal(err)
	}
	return f
}

// TestRedisTLSRoleConnects: a role given rediss:// with an ACL user, a CA
// and a client certificate reaches a TLS-only redis-server that requires
// client certificates, and runs there what roles run: PING, SET/GET, a Lua
// script, and over the role process's connection the shared limiter's
// scripts, the run state and blobs.
func TestRedisTLSRoleConnects(t *testing.T) {
	tier.Servers(t, "a cluster")
	p := newPKI(t)
	_, port := startTLSRedis(t, p)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	nats := natstest.Start(t)
	f := roleFlags(t, "--nats-url", nats.URL(), "--redis-url", "rediss://quorum:"+aclPassword+"@127.0.0.1:"+port+"/0",
		"--redis-tls-ca", p.ca, "--redis-tls-cert", p.clientCert, "--redis-tls-key", p.clientKey, "--llm-rpm", "600")

	opt, err := f.redisOptions()
	if err != nil {
		t.Fatal(err)
	}
	rdb := opt.Client()
	defer rdb.Close()
	if err := rdb.Ping(ctx).Err(); err != nil {
		t.Fatalf("PING: %v", err)
	}
	if err := rdb.Set(ctx, "quorum:tls:key", "value", time.Minute).Err(); err != nil {
		t.Fatalf("SET: %v", err)
	}
	if v, err := rdb.Get(ctx, "quorum:tls:key").Result(); err != nil || v != "value" {
		t.Fatalf("GET = %q, %v", v, err)
	}
	incr := redis.NewScript(`return redis.call('INCRBY', KEYS[1], ARGV[1])`)
	for want := int64(5); want <= 10; want += 5 { // EVAL the first time, EVALSHA the second
		if n, err := incr.Run(ctx, rdb, []string{"quorum:tls:n"}, 5).Int64(); err != nil || n != want {
			t.Fatalf("script = %d, %v; want %d", n, err, want)
		}
	}

	// The role process's one connection: the limiter's scripts, the run
	// state and the blobs.
	cfg, err := f.role(cluster.RoleVoter)
	if err != nil {
		t.Fatal(err)
	}
	cl, err := cluster.Start(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	lim := &ratelimit.LLMBudget{Limiter: cl.Limiter, Scope: "llm", Default: ratelimit.LLMQuota{RequestsPerMinute: f.llmRPM}}
	settle, err := lim.Acquire(ctx, llm.Bucket{Model: "m"}, 100)
	if err != nil {
		t.Fatalf("limiter over TLS: %v", err)
	}
	settle(ctx, 100)
	env := cl.Env
	m := &runstate.Manifest{Run: "tls", Dataset: "d", Votes: 1, Examples: []string{"e"}, Created: time.Now()}
	if _, created, err := env.State.CreateManifest(ctx, m); err != nil || !created {
		t.Fatalf("CreateManifest: created %v, %v", created, err)
	}
	if got, err := env.State.Manifest(ctx, "tls"); err != nil || got.Dataset != "d" {
		t.Fatalf("Manifest = %+v, %v", got, err)
	}
	ref, err := env.Blobs.PutString(ctx, "blob over TLS")
	if err != nil {
		t.Fatal(err)
	}
	if s, err := env.Blobs.GetString(ctx, ref); err != nil || s != "blob over TLS" {
		t.Fatalf("blob = %q, %v", s, err)
	}
}

// TestRedisTLSRefused: the same server refuses a client without a client
// certificate, with one from another CA, with a wrong password, an unknown
// user or none, and one speaking plaintext; the client refuses a server it
// cannot verify; the ACL refuses what roles never do.
func TestRedisTLSRefused(t *testing.T) {
	p := newPKI(t)
	_, port := startTLSRedis(t, p)
	good := "rediss://quorum:" + aclPassword + "@127.0.0.1:" + port + "/0"
	ca := []string{"--redis-tls-ca", p.ca}
	cert := []string{"--redis-tls-cert", p.clientCert, "--redis-tls-key", p.clientKey}
	with := func(url string, flags ...[]string) []string {
		args := []string{"--redis-url", url}
		for _, f := range flags {
			args = append(args, f...)
		}
		return args
	}
	for _, tc := range []struct {
		name string
		args []string
		// want is in the error, any of the alternatives separated by |.
		want string
	}{
		{"no client certificate", with(good, ca), "certificate required|bad certificate|connection reset"},
		{"client certificate of another CA", with(good, ca, []string{"--redis-tls-cert", p.otherClientCert, "--redis-tls-key", p.otherClientKey}),
			"unknown certificate authority|bad certificate|connection reset"},
		{"wrong password", with("rediss://quorum:wrong@127.0.0.1:"+port+"/0", ca, cert), "WRONGPASS"},
		{"unknown user", with("rediss://nobody:"+aclPassword+"@127.0.0.1:"+port+"/0", ca, cert), "WRONGPASS"},
		{"default user", with("rediss://127.0.0.1:"+port+"/0", ca, cert), "NOAUTH"},
		{"plaintext", with("redis://quorum:" + aclPassword + "@127.0.0.1:" + port + "/0"), "connection reset|EOF|broken pipe"},
		{"server not verified (system roots)", with(good, cert), "certificate signed by unknown authority"},
		{"server name not in its certificate", with("rediss://quorum:"+aclPassword+"@localhost:"+port+"/0", ca, cert), "match localhost|not localhost"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			opt, err := roleFlags(t, tc.args...).redisOptions()
			if err != nil {
				t.Fatal(err)
			}
			opt.MaxRetries = -1
			rdb := opt.Client()
			defer rdb.Close()
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			err = rdb.Set(ctx, "quorum:refused", "x", 0).Err()
			if err == nil {
				t.Fatal("connected and wrote; want a refusal")
			}
			if !matchesAny(err.Error(), tc.want) {
				t.Fatalf("error %q, want one of %q", err, tc.want)
			}
			t.Logf("refused: %v", err)
		})
	}

	t.Run("redis:// with a CA is TLS", func(t *testing.T) {
		opt, err := roleFlags(t, with("redis://quorum:"+aclPassword+"@127.0.0.1:"+port+"/0", ca, cert)...).redisOptions()
		if err != nil {
			t.Fatal(err)
		}
		rdb := opt.Client()
		defer rdb.Close()
		if err := rdb.Ping(context.Background()).Err(); err != nil {
			t.Fatal(err)
		}
	})

	t.Run("the ACL", func(t *testing.T) {
		opt, err := roleFlags(t, with(good, ca, cert)...).redisOptions()
		if err != nil {
			t.Fatal(err)
		}
		rdb := opt.Client()
		defer rdb.Close()
		ctx := context.Background()
		// deploy/check tries the ACL in full; here, that it holds over TLS.
		for _, cmd := range [][]any{
			{"flushall"}, {"config", "get", "*"}, {"keys", "*"}, {"set", "other:key", "x"}, {"get", "other:key"},
			{"eval", "return redis.call('SET', 'other:key', 'x')", "0"}, {"acl", "list"}, {"function", "flush"},
			{"scan", "0"}, {"shutdown", "nosave"}, {"publish", "quorum:c", "x"},
		} {
			err := rdb.Do(ctx, cmd...).Err()
			if err == nil || !matchesAny(err.Error(), "NOPERM|can't access") {
				t.Errorf("%v: %v, want NOPERM", cmd, err)
			}
		}
	})
}

func matchesAny(s, alternatives string) bool {
	for _, a := range strings.Split(alternatives, "|") {
		if strings.Contains(s, a) {
			return true
		}
	}
	return false
}

// TestRedisTLSFlagErrors: each misuse of the Redis flags is refused before
// any connection, naming the flag and the file, and never the password.
func TestRedisTLSFlagErrors(t *testing.T) {
	p := newPKI(t)
	notPEM := filepath.Join(t.TempDir(), "ca.txt")
	if err := os.WriteFile(notPEM, []byte("not a certificate\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	missing := filepath.Join(t.TempDir(), "missing.pem")
	const url = "rediss://quorum:pw-HIDDEN-9@redis.example:6380/0"
	for _, tc := range []struct {
		name string
		args []string
		want []string
	}{
		{"cert without key", []string{"--redis-url", url, "--redis-tls-cert", p.clientCert}, []string{"--redis-tls-cert and --redis-tls-key go together"}},
		{"key without cert", []string{"--redis-url", url, "--redis-tls-key", p.clientKey}, []string{"--redis-tls-cert and --redis-tls-key go together"}},
		{"missing CA", []string{"--redis-url", url, "--redis-tls-ca", missing}, []string{"--redis-tls-ca " + missing, "no such file"}},
		{"CA not PEM", []string{"--redis-url", url, "--redis-tls-ca", notPEM}, []string{"--redis-tls-ca " + notPEM, "no PEM certificate"}},
		{"key of another certificate", []string{"--redis-url", url, "--redis-tls-cert", p.clientCert, "--redis-tls-key", p.otherClientKey},
			[]string{"--redis-tls-cert " + p.clientCert, "--redis-tls-key " + p.otherClientKey}},
		{"bad URL", []string{"--redis-url", "redis://quorum:pw-HIDDEN-9@redis.example:port/0"}, []string{"--redis-url redis://***@redis.example"}},
		{"skip_verify with a CA", []string{"--redis-url", url + "?skip_verify=true", "--redis-tls-ca", p.ca}, []string{"skip_verify would ignore --redis-tls-ca"}},
		{"unix socket with TLS", []string{"--redis-url", "unix:///run/redis.sock", "--redis-tls-ca", p.ca}, []string{"unix socket"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := roleFlags(t, tc.args...).redisOptions()
			if err == nil {
				t.Fatal("accepted")
			}
			for _, w := range tc.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q lacks %q", err, w)
				}
			}
			if strings.Contains(err.Error(), "pw-HIDDEN-9") {
				t.Errorf("error %q shows the password", err)
			}
		})
	}

	t.Run("TLS settings", func(t *testing.T) {
		for _, tc := range []struct {
			url, serverName string
			tls             bool
		}{
			{"redis://quorum:pw@redis.example:6379/0", "", false},
			{"rediss://quorum:pw@redis.example:6380/0", "redis.example", true},
			{"redis://quorum:pw@10.1.2.3:6379/0 +ca", "10.1.2.3", true},
		} {
			args := []string{"--redis-url", strings.TrimSuffix(tc.url, " +ca")}
			if strings.HasSuffix(tc.url, " +ca") {
				args = append(args, "--redis-tls-ca", p.ca)
			}
			opt, err := roleFlags(t, args...).redisOptions()
			if err != nil {
				t.Fatal(err)
			}
			if (opt.TLSConfig != nil) != tc.tls {
				t.Fatalf("%s: TLS %v, want %v", tc.url, opt.TLSConfig != nil, tc.tls)
			}
			if !opt.ContextTimeoutEnabled || opt.Username != "quorum" || opt.Password != "pw" {
				t.Errorf("%s: options %+v", tc.url, opt)
			}
			if opt.TLSConfig == nil {
				continue
			}
			if opt.TLSConfig.ServerName != tc.serverName || opt.TLSConfig.MinVersion < tls.VersionTLS12 {
				t.Errorf("%s: ServerName %q MinVersion %x", tc.url, opt.TLSConfig.ServerName, opt.TLSConfig.MinVersion)
			}
		}
	})
}

// TestRedisStartErrorHidesPassword: when redis-server refuses the
// configuration it was given on standard input, localredis says why, but
// without the configuration line redis-server quotes back (">>> 'user
// quorum on \">password\" ...'"), which holds the password.
func TestRedisStartErrorHidesPassword(t *testing.T) {
	tier.Servers(t, "redis-server")
	const pw = "pw-Quoted-77"
	for _, tc := range []struct{ rules, why string }{
		{`~quorum:* "unbalanced`, "Unbalanced quotes"},  // redis-server quotes the line
		{"~quorum:* +nosuchcommand", "Unknown command"}, // it names the rule only
	} {
		_, err := localredis.Start(localredis.Options{Dir: t.TempDir(),
			Users: []localredis.User{{Name: "quorum", Password: pw, Rules: tc.rules}}})
		if err == nil {
			t.Fatalf("rules %q: redis-server started", tc.rules)
		}
		if !strings.Contains(err.Error(), "exited") || !strings.Contains(err.Error(), tc.why) {
			t.Errorf("rules %q: error %q does not say why redis-server stopped (%s)", tc.rules, err, tc.why)
		}
		if strings.Contains(err.Error(), pw) {
			t.Errorf("rules %q: error %q shows the password", tc.rules, err)
		}
	}
}
