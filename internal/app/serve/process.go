package serve

import (
	"fmt"
	"net"
	"os"
	"time"

	"github.com/quorumsql/quorum/internal/runtime/cluster"
	"github.com/quorumsql/quorum/internal/warehouse/schema"
)

// Process is what a question API adds to a role process besides its
// Config.
type Process struct {
	// Listener is where the API listens (nil: not here; the caller serves
	// Handler itself).
	Listener net.Listener
	// QuestionLog names the file receiving one JSON line per finished
	// question, appended to ("": none).
	QuestionLog string
	// Live, when set, are the databases Materialise wrote into
	// Config.Dataset, and Fingerprints what it returned: their schemas
	// are checked every Refresh and read again when they changed.
	Live         []LiveDB
	Fingerprints map[string]string
	Refresh      time.Duration
}

// Start runs a question API in cl, as components of its stages: the API
// listener and the live schema refresher take work in (cluster.Intake),
// the Server drives questions and a sweep at start releases what
// questions that are over left behind (cluster.Deciders); the question
// log and the files the fingerprints opened close once they have
// stopped. cfg's runtime fields (Env, Redis, Limiter, Metrics, Ready,
// Fingerprint) default to cl's.
func Start(cl *cluster.Cluster, cfg Config, p Process) (*Server, error) {
	if cfg.Env == nil {
		cfg.Env = cl.Env
	}
	if cfg.Redis == nil {
		cfg.Redis = cl.Redis
	}
	if cfg.Limiter == nil {
		cfg.Limiter = cl.Limiter
	}
	if cfg.Metrics == nil {
		cfg.Metrics = cl.Metrics
	}
	if cfg.Ready == nil {
		cfg.Ready = cl.Ready
	}
	if p.QuestionLog != "" && cfg.QuestionLog == nil {
		f, err := os.OpenFile(p.QuestionLog, os.O_CREATE|os.O_APPEND|os.O_WRONLY, 0o600)
		if err != nil {
			return nil, fmt.Errorf("question log: %w", err)
		}
		cl.Defer(func() { f.Close() })
		cfg.QuestionLog = f
	}
	s, err := New(cfg)
	if err != nil {
		return nil, err
	}
	if s.cfg.Fingerprint == nil {
		s.cfg.Fingerprint = s.fingerprintOf
	}
	cl.Defer(func() { _ = s.local.SQLite.Close() }) // the fingerprints' and reruns' files
	// What questions that are over left behind goes first: a process
	// killed before its drivers released it, an older serve's leftovers.
	if err := cl.Add(cluster.Deciders, s.sweeper()); err != nil {
		return nil, err
	}
	if err := cl.Add(cluster.Deciders, s); err != nil {
		return nil, err
	}
	if p.Live != nil {
		if err := cl.Add(cluster.Intake, &Refresher{Dir: cfg.Dataset, DBs: p.Live, Fingerprints: p.Fingerprints,
			Cache: &schema.Cache{Client: cl.Redis}, Period: p.Refresh, Log: s.cfg.Log}); err != nil {
			return nil, err
		}
	}
	if p.Listener != nil {
		if err := cl.Add(cluster.Intake, s.Listener(p.Listener)); err != nil {
			return nil, err
		}
	}
	return s, nil
}
