// Package cluster runs every quorum role in one process over real
// connections: an embedded NATS server with JetStream (or a given one), a
// spawned redis-server (or a given one), the voter, generator and explorer
// workers as goroutines. `quorum run` and `quorum bench` use it.
package cluster

import (
	"context"
	"crypto/rand"
	"crypto/tls"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/redis/go-redis/v9"
	"go.uber.org/zap"

	"github.com/quorumsql/quorum/pkg/blob"
	"github.com/quorumsql/quorum/pkg/llm"
	"github.com/quorumsql/quorum/pkg/localredis"
	"github.com/quorumsql/quorum/pkg/metrics"
	"github.com/quorumsql/quorum/pkg/queue"
	"github.com/quorumsql/quorum/pkg/ratelimit"
	"github.com/quorumsql/quorum/pkg/runtime/agent"
	"github.com/quorumsql/quorum/pkg/runtime/runenv"
	"github.com/quorumsql/quorum/pkg/runtime/runstate"
	"github.com/quorumsql/quorum/pkg/runtime/voter"
	"github.com/quorumsql/quorum/pkg/runtime/worker"
	"github.com/quorumsql/quorum/pkg/warehouse/registry"
)

// Config configures an in-process cluster.
type Config struct {
	// StateDir keeps the embedded NATS store and the local Redis AOF, so a
	// run can resume after a restart.
	StateDir string
	// NATSURL and RedisURL join running servers instead.
	NATSURL, RedisURL string
	// NATSOptions authenticate to a given NATS server (creds, NKEY, TLS).
	NATSOptions []nats.Option
	// RedisTLS, when set, is the TLS configuration for a given Redis
	// server (its CA, a client certificate).
	RedisTLS *tls.Config
	Queue    queue.Config
	// LLM configures the workers' client; LLMQuota, when set, makes every
	// call wait on the shared Redis limiter.
	LLM      llm.Config
	LLMQuota ratelimit.LLMQuota
	// Warehouses names the warehouses and their quotas; nil serves SQLite
	// files only.
	WarehousesFile *registry.File
	// Serve lists the warehouses the workers serve (default: every
	// configured one, or sqlite).
	Serve []string
	// Generators and Explorers are worker loops; each takes Concurrency
	// tasks at once (like separate worker processes).
	Generators, GeneratorConcurrency int
	Explorers, ExplorerConcurrency   int
	// Grace is how long in-flight tasks may finish once the cluster is
	// closing before they are handed back to the queue (default
	// DefaultGrace).
	Grace time.Duration
	// Agents are the agents the roles can run (pkg/agents.Builtin()).
	Agents *agent.Registry
	Log    *zap.Logger
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

// DefaultGrace is how long in-flight tasks may finish on shutdown.
const DefaultGrace = 30 * time.Second

// Cluster is a running in-process cluster.
type Cluster struct {
	Env     *runenv.Env
	Metrics *metrics.Metrics
	// NATSURL and RedisURL reach the cluster's servers; when it started
	// them they carry the credentials, so they are never printed.
	NATSURL, RedisURL string
	// Redis is the cluster's Redis client, for the process's own use.
	Redis   *redis.Client
	cancel  context.CancelFunc
	grace   time.Duration
	wg      sync.WaitGroup
	closers []func()
}

// Start brings the servers and the roles up.
func Start(ctx context.Context, cfg Config) (*Cluster, error) {
	c := &Cluster{}
	fail := func(err error) (*Cluster, error) {
		c.Close()
		return nil, err
	}
	if cfg.Log == nil {
		cfg.Log = zap.NewNop()
	}
	if cfg.Agents == nil {
		return fail(errors.New("cluster: no agents registered"))
	}
	if cfg.NATSURL == "" {
		dir := filepath.Join(cfg.StateDir, "nats")
		if err := os.MkdirAll(dir, 0o700); err != nil {
			return fail(err)
		}
		srv, err := queue.StartEmbedded(dir, -1, "quorum", secret())
		if err != nil {
			return fail(err)
		}
		c.closers = append(c.closers, srv.Shutdown)
		cfg.NATSURL = srv.URL()
	}
	if cfg.RedisURL == "" {
		dir := filepath.Join(cfg.StateDir, "redis")
		if err := os.MkdirAll(dir, 0o700); err != nil {
			return fail(err)
		}
		srv, err := localredis.Start(localredis.Options{Dir: dir, AppendOnly: true, Password: secret()})
		if err != nil {
			return fail(err)
		}
		c.closers = append(c.closers, srv.Stop)
		cfg.RedisURL = srv.URL()
	}
	c.NATSURL, c.RedisURL = cfg.NATSURL, cfg.RedisURL
	q, err := queue.Connect(ctx, cfg.NATSURL, cfg.Queue, cfg.NATSOptions...)
	if err != nil {
		return fail(err)
	}
	c.closers = append(c.closers, q.Close)
	ropt, err := redis.ParseURL(cfg.RedisURL)
	if err != nil {
		return fail(fmt.Errorf("redis url: %w", err))
	}
	ropt.ContextTimeoutEnabled = true
	if cfg.RedisTLS != nil {
		ropt.TLSConfig = cfg.RedisTLS
	}
	ropt.PoolSize = 64 + 4*(cfg.Generators*cfg.GeneratorConcurrency+cfg.Explorers*cfg.ExplorerConcurrency)
	rdb := redis.NewClient(ropt)
	c.Redis = rdb
	c.closers = append(c.closers, func() { rdb.Close() })
	if err := rdb.Ping(ctx).Err(); err != nil {
		return fail(fmt.Errorf("redis at %s: %w", ropt.Addr, err))
	}
	lim, err := ratelimit.New(ratelimit.Config{Client: rdb})
	if err != nil {
		return fail(err)
	}
	if cfg.LLMQuota.RequestsPerMinute > 0 || cfg.LLMQuota.TokensPerMinute > 0 || cfg.LLM.HasQuota() {
		cfg.LLM.Limiter = &ratelimit.LLMBudget{Limiter: lim, Scope: "llm", Default: cfg.LLMQuota}
	}
	client, err := llm.New(cfg.LLM)
	if err != nil {
		return fail(err)
	}
	var reg *registry.Registry
	if cfg.WarehousesFile != nil {
		reg = registry.WithLimiter(cfg.WarehousesFile, lim)
	}
	c.Metrics = metrics.New("cluster")
	env := &runenv.Env{Queue: q, Blobs: blob.New(rdb, 0), State: runstate.New(rdb), LLM: client, Log: cfg.Log,
		Metrics: c.Metrics, Name: "cluster", Warehouses: reg, Agents: cfg.Agents, Cache: runstate.NewCache(rdb)}
	c.Env = env
	c.closers = append(c.closers, env.Close)
	whs := cfg.Serve
	if len(whs) == 0 && reg != nil {
		for _, s := range reg.File.Warehouses {
			whs = append(whs, s.Name)
		}
	}
	if len(whs) == 0 {
		whs = []string{"sqlite"}
	}
	if cfg.Grace <= 0 {
		cfg.Grace = DefaultGrace
	}
	c.grace = cfg.Grace
	wc := queue.WorkConfig{DrainTimeout: cfg.Grace}
	// The roles outlive ctx: Close stops them, before the servers.
	wctx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	c.cancel = cancel
	start := func(name string, f func(context.Context) error) {
		c.wg.Add(1)
		go func() {
			defer c.wg.Done()
			if err := f(wctx); err != nil && !errors.Is(err, context.Canceled) {
				cfg.Log.Error("role stopped", zap.String("role", name), zap.Error(err))
			}
		}()
	}
	start("voter", func(c context.Context) error {
		return voter.Run(c, voter.Config{Env: env, Concurrency: 8, WorkConfig: wc})
	})
	for i := 0; i < max(1, cfg.Generators); i++ {
		start("generator", func(c context.Context) error {
			return worker.Run(c, worker.Config{Env: env, Pool: agent.Generator, Warehouses: whs, Concurrency: max(1, cfg.GeneratorConcurrency), WorkConfig: wc})
		})
	}
	for i := 0; i < max(1, cfg.Explorers); i++ {
		start("explorer", func(c context.Context) error {
			return worker.Run(c, worker.Config{Env: env, Pool: agent.Explorer, Warehouses: whs, Concurrency: max(1, cfg.ExplorerConcurrency), WorkConfig: wc})
		})
	}
	return c, nil
}

// Close stops in order: the roles stop taking work and let in-flight tasks
// finish within the grace period (the rest are handed back to the queue),
// then the connections close, then the servers it started (Redis flushing
// its append-only file).
func (c *Cluster) Close() {
	if c.cancel != nil {
		c.cancel()
		done := make(chan struct{})
		go func() { c.wg.Wait(); close(done) }()
		select {
		case <-done:
		case <-time.After(c.grace + 10*time.Second):
		}
	}
	for i := len(c.closers) - 1; i >= 0; i-- {
		c.closers[i]()
	}
	c.closers = nil
}
