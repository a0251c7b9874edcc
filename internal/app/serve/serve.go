// Package serve answers questions online over HTTP on quorum's runtime.
// Each question becomes a one-example interactive run: its tasks go to the
// worker pools' urgent lanes (taken before batch work) and its LLM calls
// may use the part of each quota batch runs leave free, so questions and
// batch runs share one cluster and one set of quotas. Questions, their
// answers, idempotency keys, the answer cache and tenants' counters live
// in Redis: any serve process can answer for any question, and one that
// dies mid-question is replaced (or restarted) without losing it.
package serve

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"sort"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"
	"go.uber.org/zap"

	"github.com/quorumsql/quorum/internal/metrics"
	"github.com/quorumsql/quorum/internal/ratelimit"
	"github.com/quorumsql/quorum/internal/runtime/runenv"
	"github.com/quorumsql/quorum/internal/runtime/runstate"
	"github.com/quorumsql/quorum/internal/service"
	"github.com/quorumsql/quorum/pkg/dataset"
	"github.com/quorumsql/quorum/pkg/llmsim"
	"github.com/quorumsql/quorum/pkg/warehouse/localdb"
	"github.com/quorumsql/quorum/pkg/warehouse/sqlite"
)

// Config configures a Server.
type Config struct {
	// Env is the runtime the questions run on (an in-process cluster or a
	// joined one); its agents are the ones that can be asked for.
	Env *runenv.Env
	// Redis holds questions, idempotency keys, the cache and counters.
	Redis redis.UniversalClient
	// Limiter enforces tenants' requests per minute (nil: not enforced).
	Limiter *ratelimit.Limiter
	// Dataset is the folder whose databases can be asked about (a Spider
	// layout, or one materialised from live warehouses).
	Dataset string
	// SQLiteDir is searched first for <db>.sqlite files.
	SQLiteDir string
	// Tenants, when set, requires an API key of every request; nil serves
	// without keys (only allowed on a loopback address by the command).
	Tenants *Tenants
	// DefaultAgent answers questions that name none (default the
	// registry's default agent, Env.Agents.Default);
	// Votes is the default number of candidates (default 8).
	DefaultAgent string
	Votes        int
	Seed         uint64
	// RoundTimeout and QueryTimeout are each question run's.
	RoundTimeout, QueryTimeout time.Duration
	// CacheTTL keeps answers for equal questions (0: 1h; negative: no
	// cache).
	CacheTTL time.Duration
	// Fingerprint returns a database's schema fingerprint; a cached
	// answer is used only while it is unchanged (nil: never changes).
	Fingerprint func(ctx context.Context, db *dataset.Database) (string, error)
	// StateDir receives each question run's output files while it runs
	// (removed once its answer is recorded).
	StateDir string
	// Retain.State is how long a finished question's record and its run's
	// keys stay in Redis (zero: runstate.DefaultState); Answers is not
	// used: the answer is in the record.
	Retain runstate.Retention
	// MaxRows bounds the rows an answer, or a rerun, returns (default
	// 1000).
	MaxRows int
	// MaxRuns caps the edited-SQL reruns this process runs at once
	// (default 4); each also passes its warehouse's cluster-wide quota.
	MaxRuns int
	// LLM labels the endpoint in runs (never with credentials).
	LLM string
	// Simulated says the LLM is quorum's simulator: a question it has no
	// answer for (not one of the dataset's) is told so at once instead of
	// run to a made-up SELECT 1, and the example questions are the
	// dataset's.
	Simulated bool
	// SimulatorEndpoint says the LLM endpoint is a quorum llmsim whose
	// dataset is not known here (a standalone one: its /models says it
	// is the simulator): an answer that is the simulator's own no-answer
	// query (llmsim.NoAnswerSQL) is told as "no answer", with no
	// confidence. Never set for a real model, so nothing a real model
	// writes is read that way.
	SimulatorEndpoint bool
	// VerifiedExamples offers each question the verified question–SQL
	// pairs of its database most like it (feedback), as examples in its
	// context; recorded in the run's manifest.
	VerifiedExamples bool
	// SharedVerifiedExamples pools the pairs of every tenant: each is
	// offered every tenant's pairs of the database (their question texts
	// and SQL; never the question ids). Off (the default) a tenant's
	// feedback reaches only its own questions.
	SharedVerifiedExamples bool
	// VerifiedTTL is how long a verified pair is offered after it was
	// verified (zero: Retain.State, as long as the question records it
	// comes from are kept).
	VerifiedTTL time.Duration
	// Trace is what each question's trace keeps (pkg/trace: none,
	// summary, full); empty keeps a summary.
	Trace string
	// QuestionLog receives one JSON line per finished question.
	QuestionLog io.Writer
	// Metrics receives serve's aggregate series; Handler never serves
	// them (see metrics.Serve for a listener of their own).
	Metrics *metrics.Metrics
	// HTTP bounds connections and event streams.
	HTTP HTTPLimits
	// Ready reports whether the runtime's servers answer.
	Ready func() error
	Log   *zap.Logger
}

// Server is the question API.
type Server struct {
	cfg     Config
	ds      *dataset.Dataset
	dbs     []Database
	store   *store
	quota   *quota
	owner   string
	logMu   sync.Mutex
	mu      sync.Mutex
	running map[string]context.CancelFunc
	ids     *ids
	streams streams
	feeds   feeds
	// onSettle, when set (by tests), hears each question whose late costs
	// were settled.
	onSettle func(id string)
	// ctx is Run's: questions driven here stop with it.
	ctx context.Context
	// drivers are the questions driven here, pollers the event feeds'
	// pollers, for Wait.
	drivers, pollers sync.WaitGroup
	// sim recognises the simulator's questions (Config.Simulated).
	sim *llmsim.Recogniser
	// examples are each database's example questions, made once.
	examples exampleCache
	// loop runs Run between Start and Stop (drivers.go).
	loop service.Loop
	// local opens the dataset's SQLite files for reruns and fingerprints
	// (closed with the cluster, Start).
	local *localdb.Warehouses
	// runSlots caps the reruns (run.go) this process runs at once; reruns
	// counts each tenant's, under mu (runslots.go).
	runSlots chan struct{}
	reruns   map[string]int
	// sweep releases, once at start, what questions that are over left
	// outside Redis (sweep.go).
	sweep service.Func
}

func (s *Server) baseCtx() context.Context {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.ctx == nil {
		return context.Background()
	}
	return s.ctx
}

// Database is one database that can be asked about.
type Database struct {
	Name    string `json:"name"`
	Dialect string `json:"dialect"`
	Tables  int    `json:"tables"`
	db      *dataset.Database
}

// New loads the dataset's databases and returns a server.
func New(cfg Config) (*Server, error) {
	switch {
	case cfg.Env == nil || cfg.Redis == nil:
		return nil, errors.New("serve: a runtime and a Redis client are required")
	case cfg.Dataset == "":
		return nil, errors.New("serve: a dataset folder naming the databases is required")
	}
	if cfg.DefaultAgent == "" {
		cfg.DefaultAgent = cfg.Env.Agents.Default()
	}
	if cfg.Votes <= 0 {
		cfg.Votes = 8
	}
	if cfg.Seed == 0 {
		cfg.Seed = 1
	}
	if cfg.RoundTimeout <= 0 {
		cfg.RoundTimeout = 10 * time.Minute
	}
	if cfg.CacheTTL == 0 {
		cfg.CacheTTL = time.Hour
	}
	if cfg.MaxRows <= 0 {
		cfg.MaxRows = 1000
	}
	if cfg.MaxRuns <= 0 {
		cfg.MaxRuns = 4
	}
	if cfg.Log == nil {
		cfg.Log = zap.NewNop()
	}
	cfg.HTTP.defaults()
	if _, err := cfg.Env.Agents.Lookup(cfg.DefaultAgent); err != nil {
		return nil, fmt.Errorf("serve: default agent: %w", err)
	}
	abs, err := filepath.Abs(cfg.Dataset)
	if err != nil {
		return nil, err
	}
	cfg.Dataset = abs
	ds, err := dataset.Load(abs, dataset.Options{SQLiteDir: cfg.SQLiteDir, Catalogue: true})
	if err != nil {
		return nil, fmt.Errorf("serve: %w", err)
	}
	if len(ds.Databases) == 0 {
		return nil, fmt.Errorf("serve: dataset %s has no databases", abs)
	}
	host, _ := os.Hostname()
	if cfg.Retain.State <= 0 {
		cfg.Retain.State = runstate.DefaultState
	}
	cfg.Retain.Answers = cfg.Retain.State // the answer is in the record
	s := &Server{cfg: cfg, ds: ds, store: &store{rdb: cfg.Redis, ttl: cfg.Retain.State},
		quota: &quota{rdb: cfg.Redis, lim: cfg.Limiter}, owner: fmt.Sprintf("%s-%d-%s", host, os.Getpid(), newID()),
		running: map[string]context.CancelFunc{}, ids: &ids{rdb: cfg.Redis},
		local: &localdb.Warehouses{DS: ds, SQLite: &sqlite.Set{}}, runSlots: make(chan struct{}, cfg.MaxRuns), reruns: map[string]int{}}
	s.sweep.Run = s.sweepOnce
	if cfg.Simulated {
		s.sim = llmsim.NewRecogniser(ds)
	}
	for _, db := range ds.Databases {
		d := Database{Name: db.Name, Dialect: string(db.Dialect), db: db}
		if sc, _, err := dataset.LoadSchema(db); err == nil {
			for _, f := range sc.Folders {
				d.Tables += len(f.Tables)
			}
		}
		s.dbs = append(s.dbs, d)
	}
	sort.Slice(s.dbs, func(i, j int) bool {
		if s.dbs[i].Name != s.dbs[j].Name {
			return s.dbs[i].Name < s.dbs[j].Name
		}
		return s.dbs[i].Dialect < s.dbs[j].Dialect
	})
	return s, nil
}

// Databases lists what can be asked about.
func (s *Server) Databases() []Database { return s.dbs }

// database finds a database by name (and dialect, when given), and says
// how many match: a name in several dialects needs the dialect.
func (s *Server) database(name, dialect string) (*Database, int) {
	var found *Database
	n := 0
	for i := range s.dbs {
		if s.dbs[i].Name == name && (dialect == "" || s.dbs[i].Dialect == dialect) {
			found = &s.dbs[i]
			n++
		}
	}
	return found, n
}

// Handler is the HTTP API, the web page and the health endpoints. It
// does not serve /metrics: question and tenant activity is not for
// whoever can reach the API (quorum serve puts it on --http-addr).
func (s *Server) Handler() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("POST /v1/questions", s.authed(s.postQuestion))
	mux.HandleFunc("GET /v1/questions/{id}", s.authed(s.getQuestion))
	mux.HandleFunc("GET /v1/questions/{id}/events", s.authed(s.questionEvents))
	mux.HandleFunc("DELETE /v1/questions/{id}", s.authed(s.cancelQuestion))
	mux.HandleFunc("GET /v1/questions", s.authed(s.listQuestions))
	mux.HandleFunc("GET /v1/questions/{id}/result.csv", s.authed(s.resultCSV))
	mux.HandleFunc("GET /v1/questions/{id}/trace", s.authed(s.questionTrace))
	mux.HandleFunc("POST /v1/questions/{id}/feedback", s.authed(s.postFeedback))
	mux.HandleFunc("POST /v1/questions/{id}/run", s.authed(s.runSQL))
	mux.HandleFunc("GET /v1/databases", s.authed(s.listDatabases))
	mux.HandleFunc("GET /v1/databases/{db}/schema", s.authed(s.databaseSchema))
	mux.HandleFunc("GET /v1/databases/{db}/examples", s.authed(s.exampleQuestions))
	mux.HandleFunc("GET /{$}", s.page)
	mux.HandleFunc("GET /assets/{name}", s.asset)
	metrics.HandleHealth(mux, s.cfg.Ready)
	return s.boundBody(mux)
}
