package cli

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/quorumsql/quorum/internal/app/serve"
	"github.com/quorumsql/quorum/internal/runtime/cluster"
	"github.com/quorumsql/quorum/pkg/agents"
	"github.com/quorumsql/quorum/pkg/dataset"
	"github.com/quorumsql/quorum/pkg/outputs"
	"github.com/quorumsql/quorum/pkg/trace"
)

// serveFlags configure quorum serve (and quorum ask in process).
type serveFlags struct {
	cf           clusterFlags
	lf           llmFlags
	df           datasetFlags
	dataset      string
	listen       string
	apiKeys      string
	noAuth       bool
	stateDir     string
	questionLog  string
	agent        string
	votes        int
	seed         uint64
	cacheTTL     time.Duration
	queryTimeout time.Duration
	roundTimeout time.Duration
	tenantRPM    float64
	tenantTokens int64
	tenantBudget float64
	tenantLimits []string
	explorers    int
	refresh      time.Duration
	http         serve.HTTPLimits
	retain       retainFlags
	verified     bool
	trace        string

	sharedVerified bool // serve.Config.SharedVerifiedExamples
}

func (f *serveFlags) register(cmd *cobra.Command, withListen bool) {
	f.cf.register(cmd, true)
	f.lf.register(cmd)
	f.df.register(cmd)
	fl := cmd.Flags()
	fl.StringVar(&f.dataset, "dataset", "", "dataset folder whose databases can be asked about (Spider 2.0 or BIRD layout); without it, the databases are read live: every .sqlite file of --sqlite-dir and the databases each warehouse of --warehouses-config lists")
	fl.DurationVar(&f.refresh, "schema-refresh", time.Minute, "without --dataset: how often each database's schema fingerprint is checked, and its schema read again when it changed")
	if withListen {
		fl.StringVar(&f.listen, "listen", "127.0.0.1:8080", "address of the HTTP API and web page")
		fl.StringVar(&f.apiKeys, "api-keys-file", "", "file of tenant:key lines; every request needs one of the keys (env QUORUM_API_KEYS holds the same lines, comma-separated)")
		deprecate(fl, "api-keys-file", "api-keys")
		fl.BoolVar(&f.noAuth, "no-auth", false, "serve without API keys (only on a loopback --listen address)")
		fl.Float64Var(&f.tenantRPM, "tenant-rpm", 0, "questions per minute each tenant may ask (0 = no limit)")
		fl.Int64Var(&f.tenantTokens, "tenant-tokens-per-day", 0, "LLM tokens each tenant's questions may use per UTC day (0 = no limit)")
		fl.Float64Var(&f.tenantBudget, "tenant-budget", 0, "money each tenant's questions may spend per UTC day at the endpoints' prices (0 = no limit); a question is refused (429) when the day's spend plus the tenant's mean question would pass it")
		fl.BoolVar(&f.sharedVerified, "shared-verified-examples", false, "share the verified question–SQL pairs across tenants: every tenant's questions are offered, in their prompts and records, the pairs any tenant verified on the database (their question texts and SQL); off, a tenant's feedback reaches only its own questions")
		fl.StringArrayVar(&f.tenantLimits, "tenant-limit", nil, "one tenant's own limits, TENANT=RPM/TOKENS_PER_DAY[/BUDGET_PER_DAY] (0 = no limit; repeatable)")
		fl.DurationVar(&f.http.ReadHeaderTimeout, "read-header-timeout", 10*time.Second, "drop a connection whose request headers take longer")
		fl.DurationVar(&f.http.BodyTimeout, "body-timeout", 30*time.Second, "answer 408 to a request whose body takes longer to arrive")
		fl.DurationVar(&f.http.WriteTimeout, "write-timeout", time.Minute, "drop a connection whose response (other than an event stream) takes longer to write")
		fl.DurationVar(&f.http.IdleTimeout, "idle-timeout", 2*time.Minute, "close a keep-alive connection idle this long")
		fl.DurationVar(&f.http.StreamWriteTimeout, "stream-write-timeout", 30*time.Second, "drop an event stream one of whose writes takes longer (a client that stopped reading)")
		fl.IntVar(&f.http.MaxStreams, "max-streams", 1000, "event streams this process keeps open at once; beyond, 429")
		fl.IntVar(&f.http.MaxStreamsPerTenant, "max-streams-per-tenant", 20, "event streams one tenant keeps open at once on this process; beyond, 429")
		fl.StringVar(&f.questionLog, "question-log", "", "file receiving one JSON line per finished question (default <state-dir>/questions.jsonl)")
	}
	// serve and an in-process ask each have their own folder: two
	// processes never share one Redis's files.
	role := "ask"
	if withListen {
		role = "serve"
	}
	fl.StringVar(&f.stateDir, "state-dir", userStateDir(role), "where the embedded NATS and Redis keep their data and each question's run writes its files (default: under $XDG_STATE_HOME, or ~/.local/state, whatever the current folder)")
	fl.StringVar(&f.agent, "agent", agents.Default, "agent answering questions that name none (quorum agents lists them)")
	fl.IntVar(&f.votes, "votes", 8, "candidates per question unless it asks for another number")
	fl.Uint64Var(&f.seed, "seed", 1, "seed of every question's run: the same question gets the same answer as in a dataset run with this seed")
	fl.DurationVar(&f.cacheTTL, "cache-ttl", time.Hour, "answer an equal question on an unchanged schema from the cache for this long (0 = no cache)")
	fl.DurationVar(&f.queryTimeout, "query-timeout", defaultQueryTimeout, queryTimeoutUsage)
	fl.DurationVar(&f.roundTimeout, "round-timeout", 10*time.Minute, "decide a question's round with the results that are in once none of its tasks has made progress for this long")
	fl.StringVar(&f.trace, "trace", trace.NameSummary, "what each question's trace keeps (GET /v1/questions/{id}/trace, the page's \"show the work\"): summary (tasks, timing, tokens, SQL), full (prompts, replies, query previews too) or none; kept for --retain")
	fl.BoolVar(&f.verified, "verified-examples", true, "offer each question the question–SQL pairs users verified (thumbs up, or a corrected SQL) on its database that are most like it, as examples; recorded in the question run's manifest (batch runs never use them)")
	fl.IntVar(&f.explorers, "explorers", 8, "exploration tasks handled at once in this process")
	// A question whose worker died waits this long for its task to come
	// back: shorter than a batch run's default, a user is waiting.
	f.cf.ackWait = 15 * time.Second
	fl.Lookup("ack-wait").DefValue = "15s"
	f.retain.register(fl, false)
}

// tenants reads the API keys from --api-keys-file or QUORUM_API_KEYS, with the
// tenants' limits.
func (f *serveFlags) tenants() (*serve.Tenants, error) {
	var t *serve.Tenants
	var err error
	env := os.Getenv("QUORUM_API_KEYS")
	if f.noAuth && (f.apiKeys != "" || env != "") {
		return nil, errors.New("--no-auth with API keys (--api-keys-file or QUORUM_API_KEYS): drop one of them")
	}
	switch {
	case f.apiKeys != "":
		file, ferr := os.Open(f.apiKeys)
		if ferr != nil {
			return nil, fmt.Errorf("--api-keys-file: %w", ferr)
		}
		defer file.Close()
		t, err = serve.ParseKeys(file, f.apiKeys)
	case env != "":
		t, err = serve.ParseKeys(strings.NewReader(strings.ReplaceAll(env, ",", "\n")), "QUORUM_API_KEYS")
	default:
		if !f.noAuth {
			return nil, errors.New("no API keys: pass --api-keys-file FILE (tenant:key lines) or set QUORUM_API_KEYS, or --no-auth to serve without keys on a loopback address")
		}
		if !loopback(f.listen) {
			return nil, fmt.Errorf("--no-auth: --listen %s is not a loopback address; anyone who reaches it could spend your quotas", f.listen)
		}
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	if f.tenantBudget < 0 {
		return nil, fmt.Errorf("--tenant-budget %v: want the money per day, 0 for no limit", f.tenantBudget)
	}
	t.Default = serve.Limits{RequestsPerMinute: f.tenantRPM, TokensPerDay: f.tenantTokens, BudgetPerDay: f.tenantBudget}
	names := t.Names()
	for _, spec := range f.tenantLimits {
		name, lim, ok := strings.Cut(spec, "=")
		rpm, rest, ok2 := strings.Cut(lim, "/")
		tokens, budget, withBudget := strings.Cut(rest, "/")
		r, err1 := strconv.ParseFloat(rpm, 64)
		n, err2 := strconv.ParseInt(tokens, 10, 64)
		b, err3 := f.tenantBudget, error(nil)
		if withBudget {
			b, err3 = strconv.ParseFloat(budget, 64)
		}
		if !ok || !ok2 || name == "" || err1 != nil || err2 != nil || err3 != nil || r < 0 || n < 0 || b < 0 {
			return nil, fmt.Errorf("--tenant-limit %q: want TENANT=RPM/TOKENS_PER_DAY[/BUDGET_PER_DAY], e.g. analytics=30/2000000 or analytics=30/2000000/25", spec)
		}
		if !slices.Contains(names, name) {
			// A misspelt tenant would leave the real one on the defaults.
			return nil, fmt.Errorf("--tenant-limit %q: no tenant %q among the API keys' (%s)", spec, name, strings.Join(names, ", "))
		}
		t.Limits[name] = serve.Limits{RequestsPerMinute: r, TokensPerDay: n, BudgetPerDay: b}
	}
	return t, nil
}

func loopback(addr string) bool {
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return false
	}
	if host == "localhost" {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

// serving is a running question API with its runtime.
type serving struct {
	srv   *serve.Server
	cl    *cluster.Cluster
	url   string
	label string
	// stopLLM stops the simulated LLM, once the runtime is closed.
	stopLLM func()
}

func (s *serving) close() {
	if s.cl != nil {
		s.cl.Close()
	}
	if s.stopLLM != nil {
		s.stopLLM()
	}
}

// start brings up the runtime (embedded, or joined with --nats-url and
// --redis-url) with the question API in it (internal/app/serve.Start): the flags
// checked, the databases read, the LLM resolved, the rest is theirs.
func (f *serveFlags) start(ctx context.Context, w io.Writer, tenants *serve.Tenants) (*serving, error) {
	if f.votes < 1 || f.votes > serve.MaxVotes {
		return nil, usage(fmt.Errorf("--votes %d: use 1 to %d", f.votes, serve.MaxVotes))
	}
	if f.queryTimeout <= 0 {
		return nil, usage(queryTimeoutError(f.queryTimeout))
	}
	if _, err := trace.ParseLevel(f.trace); err != nil {
		return nil, usage(err)
	}
	if f.http.MaxStreams < 0 || f.http.MaxStreamsPerTenant < 0 {
		return nil, usage(fmt.Errorf("--max-streams %d, --max-streams-per-tenant %d: want 1 or more", f.http.MaxStreams, f.http.MaxStreamsPerTenant))
	}
	// Questions, schemas and answers are the tenants': no other local user
	// may read them.
	if err := outputs.PrivateDir(f.stateDir); err != nil {
		return nil, usage(fmt.Errorf("--state-dir: %w", err))
	}
	cfg, err := f.cf.process(cluster.RoleAll)
	if err != nil {
		return nil, usage(err)
	}
	p := serve.Process{Refresh: f.refresh}
	if f.dataset == "" {
		// Databases read from their warehouses, written as a dataset.
		if p.Live, err = serve.LiveDatabases(f.df.sqliteDir, cfg.WarehousesFile); err != nil {
			return nil, usage(err)
		}
		f.dataset = filepath.Join(f.stateDir, "live")
		if p.Fingerprints, err = serve.Materialise(ctx, f.dataset, p.Live); err != nil {
			return nil, err
		}
	}
	ds, err := f.df.loadOpt(f.dataset, dataset.Options{Catalogue: true})
	if err != nil {
		return nil, usage(err)
	}
	s := &serving{}
	ok := false
	defer func() {
		if !ok {
			s.close()
		}
	}()
	lcfg, label, stop, err := f.lf.config(ds, w)
	if err != nil {
		return nil, usage(err)
	}
	s.stopLLM = stop
	simulated, err := preflight(ctx, lcfg)
	if err != nil {
		return nil, usage(err)
	}
	s.label = simulatedLabel(label, simulated, lcfg.BaseURL)
	// serve tells what the simulator cannot answer before running it only
	// when it is the one started here, over serve's own dataset; a
	// standalone llmsim's dataset is not known here, so its own no-answer
	// reply is recognised after the run (SimulatorEndpoint).
	inProcessSim := simulated && strings.HasPrefix(label, "SIMULATED LLM (quorum llmsim,")
	listen := f.listen
	if listen == "" {
		listen = "127.0.0.1:0"
	}
	if p.Listener, err = net.Listen("tcp", listen); err != nil {
		return nil, usage(fmt.Errorf("--listen %s: %w", listen, err))
	}
	if f.listen != "" {
		p.QuestionLog = f.questionLog
		if p.QuestionLog == "" {
			p.QuestionLog = filepath.Join(f.stateDir, "questions.jsonl")
		}
	}
	cfg.StateDir, cfg.LLM = f.stateDir, lcfg
	cfg.Generators, cfg.GeneratorConcurrency, cfg.Explorers, cfg.ExplorerConcurrency = 1, f.cf.concurrency, 1, f.explorers
	if s.cl, err = startProcess(ctx, cfg); err != nil {
		p.Listener.Close()
		return nil, err
	}
	ttl := f.cacheTTL
	if ttl == 0 {
		ttl = -1
	}
	s.srv, err = serve.Start(s.cl, serve.Config{Dataset: f.dataset, SQLiteDir: f.df.sqliteDir, Tenants: tenants, DefaultAgent: f.agent,
		Votes: f.votes, Seed: f.seed, RoundTimeout: f.roundTimeout, QueryTimeout: f.queryTimeout, CacheTTL: ttl, StateDir: f.stateDir,
		Retain: f.retain.retention(), LLM: s.label, HTTP: f.http, Log: cfg.Log, Simulated: inProcessSim, SimulatorEndpoint: simulated && !inProcessSim, VerifiedExamples: f.verified,
		SharedVerifiedExamples: f.sharedVerified, Trace: f.trace}, p)
	if err != nil {
		p.Listener.Close()
		return nil, usage(err)
	}
	s.url = "http://" + p.Listener.Addr().String()
	ok = true
	return s, nil
}

// parseServeFlags parses serve's flags from args, defaults filled in (for
// tests and quorum ask).
func parseServeFlags(withListen bool, args ...string) (*serveFlags, error) {
	f := &serveFlags{}
	cmd := &cobra.Command{Use: "serve"}
	f.register(cmd, withListen)
	if err := cmd.Flags().Parse(args); err != nil {
		return nil, err
	}
	return f, nil
}

func newServeCmd() *cobra.Command {
	var f serveFlags
	cmd := &cobra.Command{
		Use:   "serve --dataset DIR",
		Short: "Answer questions over an HTTP API and a web page, on the same workers and quotas as batch runs",
		Long: `serve answers one question at a time for applications: POST /v1/questions
with {"db": ..., "question": ...}, then GET /v1/questions/{id} (or its
/events stream) for the SQL, the result rows, the confidence and the cost.
docs/api.md documents the API. Like quorum run it starts an embedded NATS
server and a redis-server with every role in process (the simulated LLM when
no endpoint is configured, labelled as such), or joins a cluster with
--nats-url and --redis-url, where questions' tasks are taken before queued
batch work. Every request needs an API key (--api-keys-file) unless --no-auth.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			ctx := cmd.Context()
			w := cmd.OutOrStdout()
			tenants, err := f.tenants()
			if err != nil {
				return usage(err)
			}
			s, err := f.start(ctx, w, tenants)
			if err != nil {
				return err
			}
			defer s.close()
			auth := "API keys required"
			if tenants == nil {
				auth = "no API keys (loopback only)"
			}
			fmt.Fprintf(w, "quorum serve: %d databases of %s at %s (%s); agent %s; LLM: %s\n",
				len(s.srv.Databases()), f.dataset, s.url, auth, f.agent, s.label)
			<-ctx.Done()
			fmt.Fprintln(w, "\nStopping: questions in flight resume when serve starts again with the same --state-dir.")
			return nil
		},
	}
	f.register(cmd, true)
	return cmd
}
