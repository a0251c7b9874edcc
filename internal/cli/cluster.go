package cli

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/spf13/cobra"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"

	"github.com/quorumsql/quorum/internal/queue"
	"github.com/quorumsql/quorum/internal/ratelimit"
	"github.com/quorumsql/quorum/internal/rdb"
	"github.com/quorumsql/quorum/internal/redact"
	"github.com/quorumsql/quorum/internal/redisconn"
	"github.com/quorumsql/quorum/internal/runtime/cluster"
	"github.com/quorumsql/quorum/internal/warehouse/registry"
	"github.com/quorumsql/quorum/pkg/agents"
)

// clusterFlags connect a role to NATS and Redis and set its shared limits.
type clusterFlags struct {
	natsURL, natsCreds, natsCA string
	natsNKey, natsCert         string
	natsKey                    string
	redisURL                   string
	redisCA, redisCert         string
	redisKey                   string
	httpAddr                   string
	name                       string
	logLevel                   string
	concurrency, maxHeld       int
	warehouses                 []string
	ackWait                    time.Duration
	redisFailover              time.Duration
	// envErr is a flag default from the environment that did not parse.
	envErr         error
	maxDeliver     int
	streamReplicas int
	llmRPM, llmTPM float64
	whQPS          float64
	whConcurrent   int
	whConfig       string
	otlpEndpoint   string
	otlpContent    bool
}

func (f *clusterFlags) register(cmd *cobra.Command, withWork bool) {
	fl := cmd.Flags()
	fl.StringVar(&f.natsURL, "nats-url", os.Getenv("QUORUM_NATS_URL"), "NATS server URL, credentials allowed (nats://user:pass@host:4222, tls:// for TLS); env QUORUM_NATS_URL")
	fl.StringVar(&f.natsCreds, "nats-creds", "", "NATS credentials file")
	fl.StringVar(&f.natsCA, "nats-tls-ca", "", "CA certificate for the NATS server")
	fl.StringVar(&f.natsNKey, "nats-nkey", "", "NKEY seed file to authenticate to NATS")
	fl.StringVar(&f.natsCert, "nats-tls-cert", "", "client certificate for NATS mutual TLS (with --nats-tls-key)")
	fl.StringVar(&f.natsKey, "nats-tls-key", "", "client key for NATS mutual TLS")
	fl.StringVar(&f.redisURL, "redis-url", os.Getenv("QUORUM_REDIS_URL"), "Redis URL with an ACL user and TLS (rediss://user:pass@host:6379/0; redis:// without TLS), or a primary behind Redis Sentinel (redis+sentinel://user:pass@s1:26379,s2:26379,s3:26379/mymaster[/db]); env QUORUM_REDIS_URL")
	fl.StringVar(&f.redisCA, "redis-tls-ca", os.Getenv("QUORUM_REDIS_TLS_CA"), "CA certificate (PEM) for the Redis server instead of the system roots; turns TLS on even for a redis:// URL; env QUORUM_REDIS_TLS_CA")
	fl.StringVar(&f.redisCert, "redis-tls-cert", os.Getenv("QUORUM_REDIS_TLS_CERT"), "client certificate for Redis mutual TLS (with --redis-tls-key); env QUORUM_REDIS_TLS_CERT")
	fl.StringVar(&f.redisKey, "redis-tls-key", os.Getenv("QUORUM_REDIS_TLS_KEY"), "client key for Redis mutual TLS; env QUORUM_REDIS_TLS_KEY")
	fl.StringVar(&f.httpAddr, "http-addr", "", "serve /healthz, /readyz and /metrics on this address (e.g. :9090)")
	fl.StringVar(&f.name, "name", "", "name of this process in results and logs (default host-pid)")
	fl.StringVar(&f.logLevel, "log-level", "info", "debug, info, warn or error")
	fl.DurationVar(&f.ackWait, "ack-wait", 60*time.Second, "redeliver a task after this long without a heartbeat")
	failover, err := envDuration("QUORUM_REDIS_FAILOVER_TIME")
	f.envErr = errors.Join(f.envErr, err)
	fl.DurationVar(&f.redisFailover, "redis-failover-time", failover, "the longest a Redis failover takes (Sentinel's down-after-milliseconds plus failover time); task leases last twice it, at least 15 s, so a task outlives a failover; env QUORUM_REDIS_FAILOVER_TIME")
	fl.IntVar(&f.maxDeliver, "max-deliver", 5, "runs of a task before it is recorded as failed (a delivery that died before starting it, waiting for a dead holder's lease, is not a run)")
	fl.IntVar(&f.streamReplicas, "stream-replicas", 0, "JetStream servers keeping a copy of quorum's streams (3 on a three-node cluster, so a run survives losing one); 0 keeps what they have (1 when creating them); never lowers them")
	fl.StringVar(&f.otlpEndpoint, "otlp-endpoint", "", "export OpenTelemetry spans over OTLP to this collector (http://host:4318; OTEL_EXPORTER_OTLP_PROTOCOL=grpc for gRPC); default OTEL_EXPORTER_OTLP_ENDPOINT, none when unset")
	fl.BoolVar(&f.otlpContent, "otlp-content", false, "put prompts, replies and SQL in the exported spans (they may hold data); also OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT=true")
	fl.StringVar(&f.whConfig, "warehouses-config", "", "YAML/JSON file naming the warehouses with their kind, connection and quotas (default: one per kind, Snowflake and BigQuery from the environment)")
	if withWork {
		fl.IntVar(&f.concurrency, "concurrency", 8, "tasks run at once (a task waiting for the LLM, its quota or a warehouse's gate leaves its slot to another)")
		fl.IntVar(&f.maxHeld, "max-held", 0, "tasks held at once, running or waiting (0 = automatic: at least 256, 4 per --concurrency slot, and what --llm-rpm starts in 20 s)")
		fl.StringSliceVar(&f.warehouses, "warehouses", nil, "names of the warehouses whose tasks this worker takes (default: every configured one)")
		fl.Float64Var(&f.llmRPM, "llm-rpm", 0, "LLM requests/min shared by the cluster (0 = no limit)")
		fl.Float64Var(&f.llmTPM, "llm-tpm", 0, "LLM tokens/min shared by the cluster (0 = no limit)")
		fl.Float64Var(&f.whQPS, "warehouse-qps", 0, "queries/sec per warehouse shared by the cluster, when --warehouses-config sets none (0 = no limit)")
		fl.IntVar(&f.whConcurrent, "warehouse-concurrency", 0, "concurrent queries per warehouse across the cluster, when --warehouses-config sets none (0 = no limit)")
	}
}

// held is the tasks a worker loop of these flags holds at once.
func (f *clusterFlags) held() int {
	if f.maxHeld > 0 {
		return f.maxHeld
	}
	return cluster.DefaultHeld(f.concurrency, ratelimit.LLMQuota{RequestsPerMinute: f.llmRPM, TokensPerMinute: f.llmTPM})
}

// natsOptions are the NATS authentication and TLS options the flags ask
// for: a creds file, an NKEY seed, a CA, a client certificate.
func (f *clusterFlags) natsOptions() ([]nats.Option, error) {
	var opts []nats.Option
	if f.natsCreds != "" {
		opts = append(opts, nats.UserCredentials(f.natsCreds))
	}
	if f.natsNKey != "" {
		o, err := nats.NkeyOptionFromSeed(f.natsNKey)
		if err != nil {
			return nil, fmt.Errorf("--nats-nkey %s: %w", f.natsNKey, err)
		}
		opts = append(opts, o)
	}
	if f.natsCA != "" {
		opts = append(opts, nats.RootCAs(f.natsCA))
	}
	if (f.natsCert == "") != (f.natsKey == "") {
		return nil, fmt.Errorf("--nats-tls-cert and --nats-tls-key go together")
	}
	if f.natsCert != "" {
		opts = append(opts, nats.ClientCert(f.natsCert, f.natsKey))
	}
	return opts, nil
}

// redisOptions are the Redis client options of --redis-url and the
// --redis-tls-* flags, shared by every connection a role opens. A CA or a
// client certificate turns TLS on even for a redis:// URL, as
// --nats-tls-ca does for NATS: whoever names a CA expects TLS, and
// plaintext would send the ACL password in the clear.
func (f *clusterFlags) redisOptions() (*redisconn.Options, error) {
	opt, err := redisconn.Parse(f.redisURL)
	if err != nil {
		return nil, fmt.Errorf("--redis-url %s: %w", redact.URL(f.redisURL), err)
	}
	if (f.redisCert == "") != (f.redisKey == "") {
		return nil, errors.New("--redis-tls-cert and --redis-tls-key go together")
	}
	if f.redisCA == "" && f.redisCert == "" {
		return opt, nil
	}
	if opt.Network == "unix" {
		return nil, fmt.Errorf("--redis-tls-ca/--redis-tls-cert: --redis-url %s is a unix socket, which takes no TLS", redact.URL(f.redisURL))
	}
	if opt.TLSConfig == nil && opt.Sentinel != nil {
		// The primary's host is learnt from the sentinels: the TLS
		// dialer names the host it dials.
		opt.TLSConfig = &tls.Config{}
	}
	if opt.TLSConfig == nil {
		host, _, err := net.SplitHostPort(opt.Addr)
		if err != nil {
			return nil, fmt.Errorf("--redis-url %s: %w", redact.URL(f.redisURL), err)
		}
		opt.TLSConfig = &tls.Config{ServerName: host}
	}
	if opt.TLSConfig.InsecureSkipVerify && f.redisCA != "" {
		return nil, fmt.Errorf("--redis-url %s: skip_verify would ignore --redis-tls-ca; drop one of them", redact.URL(f.redisURL))
	}
	opt.TLSConfig.MinVersion = max(opt.TLSConfig.MinVersion, tls.VersionTLS12)
	if f.redisCA != "" {
		pem, err := os.ReadFile(f.redisCA)
		if err != nil {
			return nil, fmt.Errorf("--redis-tls-ca %s: %w", f.redisCA, err)
		}
		roots := x509.NewCertPool()
		if !roots.AppendCertsFromPEM(pem) {
			return nil, fmt.Errorf("--redis-tls-ca %s: no PEM certificate in the file", f.redisCA)
		}
		opt.TLSConfig.RootCAs = roots
	}
	if f.redisCert != "" {
		cert, err := tls.LoadX509KeyPair(f.redisCert, f.redisKey)
		if err != nil {
			return nil, fmt.Errorf("--redis-tls-cert %s / --redis-tls-key %s: %w", f.redisCert, f.redisKey, err)
		}
		opt.TLSConfig.Certificates = []tls.Certificate{cert}
	}
	return opt, nil
}

// redisTLS is the TLS configuration of a given Redis server, for roles
// run in process by quorum run and serve (nil for an embedded server).
func (f *clusterFlags) redisTLS() (*tls.Config, error) {
	if f.redisURL == "" {
		if f.redisCA != "" || f.redisCert != "" {
			return nil, errors.New("--redis-tls-ca/--redis-tls-cert need --redis-url: the embedded Redis listens on 127.0.0.1 without TLS")
		}
		return nil, nil
	}
	opt, err := f.redisOptions()
	if err != nil {
		return nil, err
	}
	return opt.TLSConfig, nil
}

// userStateDir is a per-user folder for a command's state (serve's, an
// in-process ask's): $XDG_STATE_HOME/quorum/NAME, ~/.local/state/quorum/NAME
// without it, and out/NAME only when there is no home folder.
func userStateDir(name string) string {
	if d := os.Getenv("XDG_STATE_HOME"); filepath.IsAbs(d) {
		return filepath.Join(d, "quorum", name)
	}
	if home, err := os.UserHomeDir(); err == nil && home != "" {
		return filepath.Join(home, ".local", "state", "quorum", name)
	}
	return filepath.Join("out", name)
}

// quietLogs makes warn the default log level of a command a user watches
// (run, ask): its progress lines are the output, and info-level JSON lines
// would interleave with them; --log-level info brings them back.
func quietLogs(cmd *cobra.Command, level *string) {
	*level = "warn"
	cmd.Flags().Lookup("log-level").DefValue = "warn"
}

func newLogger(level string) (*zap.Logger, error) {
	var lvl zapcore.Level
	if err := lvl.Set(level); err != nil {
		return nil, fmt.Errorf("--log-level %q: %w", level, err)
	}
	cfg := zap.NewProductionConfig()
	cfg.Level = zap.NewAtomicLevelAt(lvl)
	cfg.Sampling = nil
	cfg.OutputPaths = []string{"stderr"}
	return cfg.Build()
}

// envDuration reads a flag's default duration from the environment
// variable name (0 when unset).
func envDuration(name string) (time.Duration, error) {
	v := strings.TrimSpace(os.Getenv(name))
	if v == "" {
		return 0, nil
	}
	d, err := time.ParseDuration(v)
	if err != nil || d < 0 {
		return 0, fmt.Errorf("environment variable %s=%q: want a duration such as 10s", name, v)
	}
	return d, nil
}

// process is the configuration of a role process (internal/runtime/cluster)
// on the servers the flags name, or on servers it starts when they name
// none; the caller adds the LLM and the roles' sizes. role names the
// process's metrics and, with --name, the process in results and logs.
func (f *clusterFlags) process(role string) (cluster.Config, error) {
	if f.envErr != nil {
		return cluster.Config{}, f.envErr
	}
	log, err := newLogger(f.logLevel)
	if err != nil {
		return cluster.Config{}, err
	}
	natsOpts, err := f.natsOptions()
	if err != nil {
		return cluster.Config{}, err
	}
	redisTLS, err := f.redisTLS()
	if err != nil {
		return cluster.Config{}, err
	}
	file, err := f.warehousesFile()
	if err != nil {
		return cluster.Config{}, err
	}
	for _, w := range f.warehouses {
		if _, ok := file.Spec(w); !ok {
			return cluster.Config{}, fmt.Errorf("--warehouses: %q is not a configured warehouse (configured: %s)", w, names(file))
		}
	}
	return cluster.Config{Role: role, Name: f.name, NATSURL: f.natsURL, RedisURL: f.redisURL, NATSOptions: natsOpts, RedisTLS: redisTLS,
		Queue: queue.Config{AckWait: f.ackWait, MaxDeliver: f.maxDeliver, Replicas: f.streamReplicas}, LLMQuota: ratelimit.LLMQuota{RequestsPerMinute: f.llmRPM, TokensPerMinute: f.llmTPM}, MaxHeld: f.maxHeld,
		WarehousesFile: file, Serve: f.warehouses, HTTPAddr: f.httpAddr, Agents: agents.Builtin(), Log: log,
		OTLPEndpoint: f.otlpEndpoint, OTLPContent: f.otlpContent, TaskLeaseTTL: rdb.TaskLeaseTTLFor(f.redisFailover)}, nil
}

// role is the configuration of a role binary's process: it joins the
// servers the flags name (both are required) and is named role-host-pid
// unless --name says otherwise.
func (f *clusterFlags) role(role string) (cluster.Config, error) {
	if f.natsURL == "" || f.redisURL == "" {
		return cluster.Config{}, errors.New("--nats-url and --redis-url are required (or QUORUM_NATS_URL / QUORUM_REDIS_URL); `quorum run` starts both for you on one machine")
	}
	cfg, err := f.process(role)
	if err != nil {
		return cfg, err
	}
	if cfg.Name == "" {
		host, _ := os.Hostname()
		cfg.Name = fmt.Sprintf("%s-%s-%d", role, host, os.Getpid())
	}
	cfg.Log = cfg.Log.With(zap.String("role", role), zap.String("process", cfg.Name))
	return cfg, nil
}

// startProcess starts a role process; a listener it cannot open is
// --http-addr's usage error.
func startProcess(ctx context.Context, cfg cluster.Config) (*cluster.Cluster, error) {
	cl, err := cluster.Start(ctx, cfg)
	var le *cluster.ListenError
	if errors.As(err, &le) {
		return nil, usage(fmt.Errorf("--http-addr %s: %w", le.Addr, le.Err))
	}
	return cl, err
}

// serveRole runs a role binary's process until ctx ends (or a role of it
// fails), then stops it.
func serveRole(ctx context.Context, cfg cluster.Config) error {
	cl, err := startProcess(ctx, cfg)
	if err != nil {
		return err
	}
	defer func() {
		cl.Close()
		_ = cfg.Log.Sync()
	}()
	return cl.Wait(ctx)
}

// warehousesFile loads the warehouses configuration, or the default (one
// per kind, quotas from the flags).
func (f *clusterFlags) warehousesFile() (*registry.File, error) {
	if f.whConfig != "" {
		return registry.Load(f.whConfig)
	}
	file := registry.Default(os.Getenv)
	for i := range file.Warehouses {
		file.Warehouses[i].Quota = registry.Quota{QueriesPerSecond: f.whQPS, MaxConcurrent: f.whConcurrent}
	}
	return file, nil
}

func names(f *registry.File) string {
	var out []string
	for _, s := range f.Warehouses {
		out = append(out, s.Name)
	}
	return strings.Join(out, ", ")
}
