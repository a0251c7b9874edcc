// Package cluster assembles a quorum role process: its servers (an
// embedded NATS server with JetStream and a spawned redis-server, or given
// ones), its connections, the shared limiter, the LLM client, the
// warehouses, the process environment, and the roles it runs as
// components — the voter, generator and explorer workers, the health and
// metrics listener. It is the one place a role process is put together:
// the role binaries (coordinator, generator-worker, explorer-worker,
// voter) assemble theirs here, and so do `quorum run`, `quorum serve` and
// `ask` (every role in one process) and `quorum bench`. It owns every
// client and server it creates, and its Close (stop.go) is the one place
// a process's shutdown order is declared.
package cluster

import (
	"context"
	"crypto/rand"
	"crypto/tls"
	"encoding/hex"
	"errors"
	"fmt"
	"math"
	"net"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/redis/go-redis/v9"
	"go.uber.org/zap"

	"github.com/quorumsql/quorum/internal/blob"
	"github.com/quorumsql/quorum/internal/localredis"
	"github.com/quorumsql/quorum/internal/metrics"
	"github.com/quorumsql/quorum/internal/queue"
	"github.com/quorumsql/quorum/internal/ratelimit"
	"github.com/quorumsql/quorum/internal/redact"
	"github.com/quorumsql/quorum/internal/redisconn"
	"github.com/quorumsql/quorum/internal/runtime/runenv"
	"github.com/quorumsql/quorum/internal/runtime/runstate"
	"github.com/quorumsql/quorum/internal/runtime/voter"
	"github.com/quorumsql/quorum/internal/runtime/worker"
	"github.com/quorumsql/quorum/internal/service"
	"github.com/quorumsql/quorum/internal/warehouse/registry"
	"github.com/quorumsql/quorum/pkg/llm"
	"github.com/quorumsql/quorum/pkg/outputs"
	"github.com/quorumsql/quorum/pkg/runtime/agent"
	"github.com/quorumsql/quorum/pkg/trace"
)

// The roles a process can be assembled for.
const (
	// RoleAll runs the voter, the generator and the explorer workers in
	// process (quorum run, serve, ask, bench); its coordinators run in
	// the foreground or as serve's question drivers.
	RoleAll = "cluster"
	// RoleCoordinator runs no background role: the process drives a run
	// in the foreground. It makes no LLM calls.
	RoleCoordinator = "coordinator"
	// RoleVoter runs the voter. It makes no LLM calls.
	RoleVoter = "voter"
	// RoleGenerator and RoleExplorer run the generator and the explorer
	// workers.
	RoleGenerator = "generator"
	RoleExplorer  = "explorer"
)

// Config configures a role process.
type Config struct {
	// Role is what the process runs (default RoleAll). It names the
	// process's metrics.
	Role string
	// Name identifies the process in results and logs (default: Role).
	Name string
	// StateDir keeps the embedded NATS store and the local Redis AOF, so a
	// run can resume after a restart.
	StateDir string
	// NATSURL and RedisURL join running servers; empty, the process starts
	// its own.
	NATSURL, RedisURL string
	// NATSOptions authenticate to a given NATS server (creds, NKEY, TLS).
	NATSOptions []nats.Option
	// RedisTLS, when set, is the TLS configuration for a given Redis
	// server (its CA, a client certificate).
	RedisTLS *tls.Config
	Queue    queue.Config
	// LLM configures the workers' client; its calls wait on the shared
	// Redis limiter, within LLMQuota by default (zero: no limit but the
	// endpoints' own quotas). Roles that make no LLM calls ignore it.
	LLM      llm.Config
	LLMQuota ratelimit.LLMQuota
	// WarehousesFile names the warehouses and their quotas; nil serves
	// SQLite files only.
	WarehousesFile *registry.File
	// Serve lists the warehouses the workers serve (default: every
	// configured one, or sqlite).
	Serve []string
	// Generators and Explorers are worker loops; each takes Concurrency
	// tasks at once (like separate worker processes).
	Generators, GeneratorConcurrency int
	Explorers, ExplorerConcurrency   int
	// MaxHeld is how many tasks each worker loop holds at once, running
	// or waiting for the LLM, its quota or a warehouse's gate (default
	// DefaultHeld). A waiting task leaves its slot to another, so the
	// concurrencies bound the CPU work and MaxHeld the memory; the quotas
	// bound the throughput.
	MaxHeld int
	// TaskLeaseTTL is how long a task's lease lasts without a renewal
	// (0: 15 s); the role binaries derive it from --redis-failover-time.
	TaskLeaseTTL time.Duration
	// VoterConcurrency is how many results the voter records at once
	// (default 8).
	VoterConcurrency int
	// HTTPAddr, when set, serves /healthz, /readyz and /metrics there.
	HTTPAddr string
	// Grace is how long in-flight tasks may finish once the process is
	// closing before they are handed back to the queue (default
	// DefaultGrace).
	Grace time.Duration
	// Agents are the agents the roles can run (pkg/agents.Builtin()).
	Agents *agent.Registry
	Log    *zap.Logger
	// OTLPEndpoint exports the process's spans to an OpenTelemetry
	// collector (--otlp-endpoint; empty reads OTEL_EXPORTER_OTLP_ENDPOINT,
	// and no export when that is unset too); OTLPContent puts prompts,
	// replies and SQL in them.
	OTLPEndpoint string
	OTLPContent  bool
}

// secret is a fresh credential for a server this process starts: only its
// own roles learn it (a resumed run starts its servers with new ones).
func secret() string {
	var b [24]byte
	if _, err := rand.Read(b[:]); err != nil {
		panic(err) // crypto/rand does not fail on Linux
	}
	return hex.EncodeToString(b[:])
}

// DefaultHeld is the tasks a worker loop of concurrency slots holds at
// once within an LLM quota: at least 256 and four per slot, and the calls
// the quota starts in 20 seconds (a slow reply's time), so that waiting
// tasks never leave the quota unused.
func DefaultHeld(concurrency int, q ratelimit.LLMQuota) int {
	return max(256, 4*concurrency, int(math.Ceil(q.RequestsPerMinute/3)))
}

// DefaultGrace is how long in-flight tasks may finish on shutdown.
const DefaultGrace = 30 * time.Second

// Cluster is a running role process.
type Cluster struct {
	Env     *runenv.Env
	Metrics *metrics.Metrics
	// NATSURL and RedisURL reach the process's servers; when it started
	// them they carry the credentials, so they are never printed.
	NATSURL, RedisURL string
	// Redis is the process's Redis client, for its own use; Limiter is
	// the shared limiter on it.
	Redis   *redis.Client
	Limiter *ratelimit.Limiter
	// HTTPAddr is where the health and metrics listener listens (nil
	// without Config.HTTPAddr).
	HTTPAddr net.Addr
	// Health is what this process's LLM calls heard of their deployments'
	// cooldowns (for the progress line).
	Health *DeploymentHealth

	log      *zap.Logger
	grace    time.Duration
	exporter *trace.Exporter
	// ctx is the components' context: they outlive Start's, and Close
	// stops them.
	ctx    context.Context
	cancel context.CancelFunc

	mu         sync.Mutex
	closed     bool
	components [stages][]service.Service
	deferred   []func()
	roles      []role
	watch      *watcher

	llm         *llm.OpenAI
	budget      *ratelimit.LLMBudget
	queue       *queue.Queue
	natsServer  *queue.Embedded
	redisServer *localredis.Server
}

// Limits is what this process's LLM limiter learned of the models' real
// limits (none for a process that calls no LLM, or when Redis fails: the
// run's report then goes without them).
func (c *Cluster) Limits(ctx context.Context) []outputs.LimitLearned {
	if c.budget == nil {
		return nil
	}
	ls, err := c.budget.LearnedLimits(ctx)
	if err != nil {
		c.log.Warn("the limits learned are left out of the report", zap.Error(err))
		return nil
	}
	out := make([]outputs.LimitLearned, len(ls))
	for i, l := range ls {
		out[i] = outputs.LimitLearned{Endpoint: l.Endpoint, Model: l.Model, ConfiguredRPM: l.ConfiguredRPM, ConfiguredTPM: l.ConfiguredTPM,
			StatedRPM: l.StatedRPM, StatedTPM: l.StatedTPM, LearnedRPM: l.LearnedRPM, LearnedTPM: l.LearnedTPM, Cuts: l.Cuts}
	}
	return out
}

// LimitChanges are the quotas set on the running cluster from from to to
// (none when Redis fails: the run's report then goes without them).
func (c *Cluster) LimitChanges(ctx context.Context, from, to time.Time) []outputs.LimitChange {
	cs, err := c.Limiter.LimitChangesBetween(ctx, from, to)
	if err != nil {
		c.log.Warn("the limit changes are left out of the report", zap.Error(err))
		return nil
	}
	out := make([]outputs.LimitChange, len(cs))
	for i, ch := range cs {
		out[i] = outputs.LimitChange{Group: ch.Group, RPM: ch.Quota.RequestsPerMinute, TPM: ch.Quota.TokensPerMinute, At: ch.At, Cleared: ch.Cleared}
	}
	return out
}

// ListenError is Start's error when the health and metrics listener
// cannot listen on Config.HTTPAddr.
type ListenError struct {
	Addr string
	Err  error
}

func (e *ListenError) Error() string { return fmt.Sprintf("listen on %s: %v", e.Addr, e.Err) }
func (e *ListenError) Unwrap() error { return e.Err }

// role is a role component the process watches: one that ends by itself
// (its consumer failed) ends the process.
type role struct {
	name string
	c    interface {
		service.Service
		Done() <-chan struct{}
		Err() error
	}
}

// Start brings the servers, the connections and the roles up. On error,
// whatever it started is stopped.
func Start(ctx context.Context, cfg Config) (*Cluster, error) {
	cfg.defaults()
	sh, err := shapeOf(cfg)
	if err != nil {
		return nil, err
	}
	wctx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	c := &Cluster{log: cfg.Log, grace: cfg.Grace, ctx: wctx, cancel: cancel, Health: NewDeploymentHealth()}
	fail := func(err error) (*Cluster, error) {
		c.Close()
		return nil, err
	}
	if err := c.startServers(&cfg); err != nil {
		return fail(err)
	}
	if err := c.connect(ctx, cfg, sh); err != nil {
		return fail(err)
	}
	var client llm.Client
	if sh.calls {
		if client, err = c.llmClient(cfg); err != nil {
			return fail(err)
		}
	}
	reg, whs, err := warehouses(cfg, c.Limiter)
	if err != nil {
		return fail(err)
	}
	c.Metrics = metrics.New(cfg.Role)
	exp, err := trace.NewExporter(ctx, trace.ExportConfig{Endpoint: cfg.OTLPEndpoint, Service: "quorum-" + cfg.Role,
		Instance: cfg.Name, Content: cfg.OTLPContent})
	if err != nil {
		return fail(err)
	}
	c.exporter = exp
	blobs, state := blob.New(c.Redis, 0), runstate.New(c.Redis)
	c.Env = &runenv.Env{Queue: c.queue, Blobs: blobs, State: state, LLM: client, Log: cfg.Log,
		Metrics: c.Metrics, Name: cfg.Name, Incarnation: incarnation(), TaskLeaseTTL: cfg.TaskLeaseTTL, Warehouses: reg, Agents: cfg.Agents, Cache: runstate.NewCache(c.Redis),
		Traces: &trace.Store{Lists: state, Blobs: blobs}, Exporter: exp}
	if cfg.HTTPAddr != "" {
		l, err := metrics.Listen(cfg.HTTPAddr, c.Metrics, c.Ready)
		if err != nil {
			return fail(&ListenError{Addr: cfg.HTTPAddr, Err: err})
		}
		if err := c.Add(Intake, l); err != nil {
			return fail(err)
		}
		c.HTTPAddr = l.Addr()
	}
	if err := c.startRoles(cfg, sh, whs); err != nil {
		return fail(err)
	}
	c.watch = &watcher{c: c}
	if err := c.watch.Start(wctx); err != nil {
		return fail(err)
	}
	return c, nil
}

// defaults fills the zero fields Start needs.
func (cfg *Config) defaults() {
	if cfg.Log == nil {
		cfg.Log = zap.NewNop()
	}
	if cfg.Role == "" {
		cfg.Role = RoleAll
	}
	if cfg.Name == "" {
		cfg.Name = cfg.Role
	}
	if cfg.Grace <= 0 {
		cfg.Grace = DefaultGrace
	}
	if cfg.VoterConcurrency <= 0 {
		cfg.VoterConcurrency = 8
	}
}

// shape is what a process of a role runs: its generator and explorer
// workers, whether it votes, and whether it calls the LLM.
type shape struct {
	gens, exps    int
	voting, calls bool
}

func shapeOf(cfg Config) (shape, error) {
	var sh shape
	switch cfg.Role {
	case RoleAll:
		sh = shape{gens: max(1, cfg.Generators), exps: max(1, cfg.Explorers), voting: true, calls: true}
	case RoleCoordinator:
	case RoleVoter:
		sh.voting = true
	case RoleGenerator:
		sh.gens, sh.calls = max(1, cfg.Generators), true
	case RoleExplorer:
		sh.exps, sh.calls = max(1, cfg.Explorers), true
	default:
		return sh, fmt.Errorf("cluster: unknown role %q", cfg.Role)
	}
	if cfg.Agents == nil {
		return sh, errors.New("cluster: no agents registered")
	}
	return sh, nil
}

// startServers starts an embedded NATS and a redis-server where cfg names
// none, and points cfg at them.
func (c *Cluster) startServers(cfg *Config) error {
	if cfg.NATSURL == "" {
		dir := filepath.Join(cfg.StateDir, "nats")
		if err := os.MkdirAll(dir, 0o700); err != nil {
			return err
		}
		srv, err := queue.StartEmbedded(dir, -1, "quorum", secret())
		if err != nil {
			return err
		}
		c.natsServer = srv
		cfg.NATSURL = srv.URL()
	}
	if cfg.RedisURL == "" {
		dir := filepath.Join(cfg.StateDir, "redis")
		if err := os.MkdirAll(dir, 0o700); err != nil {
			return err
		}
		srv, err := localredis.Start(localredis.Options{Dir: dir, AppendOnly: true, Password: secret()})
		if err != nil {
			return err
		}
		c.redisServer = srv
		cfg.RedisURL = srv.URL()
	}
	c.NATSURL, c.RedisURL = cfg.NATSURL, cfg.RedisURL
	return nil
}

// connect connects to NATS and Redis (a pool sized for the process's task
// slots) and makes the process's limiter.
func (c *Cluster) connect(ctx context.Context, cfg Config, sh shape) error {
	// Checked before connecting anywhere: a wrong URL is reported at once.
	ropt, err := redisconn.Parse(cfg.RedisURL)
	if err != nil {
		return fmt.Errorf("redis url %s: %w", redact.URL(cfg.RedisURL), err)
	}
	if cfg.RedisTLS != nil {
		ropt.TLSConfig = cfg.RedisTLS
	}
	slots := sh.gens*max(1, cfg.GeneratorConcurrency) + sh.exps*max(1, cfg.ExplorerConcurrency)
	if cfg.Role == RoleAll {
		ropt.PoolSize = max(ropt.PoolSize, 64+4*slots)
	} else {
		if sh.voting {
			slots += cfg.VoterConcurrency
		}
		ropt.PoolSize = max(ropt.PoolSize, 16+4*slots)
	}
	q, err := queue.Connect(ctx, cfg.NATSURL, cfg.Queue, cfg.NATSOptions...)
	if err != nil {
		return err
	}
	c.queue = q
	if asked, has := cfg.Queue.Replicas, q.Config().Replicas; asked > 0 && has > asked {
		// Streams are never lowered: say so rather than let the flag
		// suggest fewer copies than there are.
		cfg.Log.Warn("--stream-replicas is below the streams' replicas, which are never lowered: they keep theirs",
			zap.Int("stream_replicas", asked), zap.Int("streams_keep", has))
	}
	c.Redis = ropt.Client()
	if err := c.Redis.Ping(ctx).Err(); err != nil {
		return fmt.Errorf("connect to Redis at %s: %w", ropt.Where(), err)
	}
	c.Limiter, err = ratelimit.New(ratelimit.Config{Client: c.Redis})
	return err
}

// llmClient is the process's LLM client, behind the cluster-wide limiter.
func (c *Cluster) llmClient(cfg Config) (llm.Client, error) {
	// Always the limiter: endpoints carry their own quotas, a 429's
	// cooldown is shared, the provider's real limits are learned, and
	// with no quota anywhere (none configured, none heard of) a call
	// does not touch Redis.
	c.budget = &ratelimit.LLMBudget{Limiter: c.Limiter, Scope: "llm", Default: cfg.LLMQuota, Overrides: ratelimit.NewOverrides(c.Limiter),
		Learning: ratelimit.NewLearning(),
		OnHealth: func(endpoint, model string, d time.Duration) {
			c.Metrics.DeploymentHealth(endpoint, model, d)
			c.Health.Set(endpoint, model, d)
		}}
	cfg.LLM.Limiter = c.budget
	oc, err := llm.New(cfg.LLM)
	if err != nil {
		return nil, err
	}
	c.llm = oc
	return oc, nil
}

// warehouses is the configured warehouses' registry (nil: the datasets'
// SQLite files) and the warehouses this process serves.
func warehouses(cfg Config, limiter *ratelimit.Limiter) (*registry.Registry, []string, error) {
	var reg *registry.Registry
	if cfg.WarehousesFile != nil {
		reg = registry.WithLimiter(cfg.WarehousesFile, limiter)
	}
	whs := cfg.Serve
	if len(whs) == 0 && reg != nil {
		for _, s := range reg.File.Warehouses {
			whs = append(whs, s.Name)
		}
	}
	if len(whs) == 0 {
		whs = []string{"sqlite"}
	}
	if reg != nil {
		for _, w := range whs {
			if _, ok := reg.File.Spec(w); !ok {
				return nil, nil, fmt.Errorf("warehouse %q is not configured (configured: %s)", w, configured(reg.File))
			}
		}
	}
	return reg, whs, nil
}

// startRoles starts the process's voter and workers as components.
func (c *Cluster) startRoles(cfg Config, sh shape, whs []string) error {
	wc := queue.WorkConfig{DrainTimeout: cfg.Grace}
	if sh.voting {
		if err := c.addRole(Deciders, "voter", voter.New(voter.Config{Env: c.Env, Concurrency: cfg.VoterConcurrency, WorkConfig: wc})); err != nil {
			return err
		}
	}
	for _, w := range []struct {
		pool        agent.Pool
		n, parallel int
	}{{agent.Generator, sh.gens, cfg.GeneratorConcurrency}, {agent.Explorer, sh.exps, cfg.ExplorerConcurrency}} {
		for range w.n {
			wwc := wc
			if wwc.MaxHeld = cfg.MaxHeld; wwc.MaxHeld <= 0 {
				wwc.MaxHeld = DefaultHeld(w.parallel, cfg.LLMQuota)
			}
			wk, err := worker.New(worker.Config{Env: c.Env, Pool: w.pool, Warehouses: whs, Concurrency: max(1, w.parallel), WorkConfig: wwc})
			if err != nil {
				return err
			}
			if err := c.addRole(Workers, string(w.pool), wk); err != nil {
				return err
			}
		}
	}
	return nil
}

// Ready reports whether the process's Redis answers (its readiness).
func (c *Cluster) Ready() error { return c.Env.State.Ping(c.ctx) }

// addRole starts a role component in its stage and watches it.
func (c *Cluster) addRole(st Stage, name string, r interface {
	service.Service
	Done() <-chan struct{}
	Err() error
}) error {
	if err := c.Add(st, r); err != nil {
		return fmt.Errorf("%s: %w", name, err)
	}
	c.mu.Lock()
	c.roles = append(c.roles, role{name: name, c: r})
	c.mu.Unlock()
	return nil
}

func configured(f *registry.File) string {
	var out []string
	for _, s := range f.Warehouses {
		out = append(out, s.Name)
	}
	return strings.Join(out, ", ")
}

// incarnation is a random name for this start of the process
// (runenv.Env.Incarnation).
func incarnation() string { return secret()[:12] }
