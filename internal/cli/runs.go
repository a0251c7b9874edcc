package cli

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/quorumsql/quorum/internal/app/compare"
	"github.com/quorumsql/quorum/internal/localredis"
	"github.com/quorumsql/quorum/internal/queue"
	"github.com/quorumsql/quorum/internal/redisconn"
	"github.com/quorumsql/quorum/internal/runtime/runstate"
)

// retainFlags set how long a finished run's keys stay in Redis (run,
// coordinator, serve).
type retainFlags struct {
	state, answers days
}

// register adds --retain and, for batch runs (answers), --retain-answers.
func (f *retainFlags) register(fl *pflag.FlagSet, answers bool) {
	f.state = days(runstate.DefaultState)
	if !answers {
		fl.Var(&f.state, "retain", "keep a finished question's record and its run's keys in Redis this long (e.g. 7d, 36h)")
		return
	}
	fl.Var(&f.state, "retain", "keep a finished run's per-task state in Redis this long (e.g. 7d, 36h); an unfinished run's never expires")
	f.answers = days(runstate.DefaultAnswers)
	fl.Var(&f.answers, "retain-answers", "keep a finished run's manifest and final answers this long, at least --retain (their result tables are kept 14 days)")
}

// retention is the flags' retention; without --retain-answers (serve) the
// answers go with the state: a question's answer is in its record.
func (f *retainFlags) retention() runstate.Retention {
	r := runstate.Retention{State: time.Duration(f.state), Answers: time.Duration(f.answers)}
	if r.Answers == 0 {
		r.Answers = r.State
	}
	return r.WithDefaults()
}

// days is a positive duration that also takes days ("7d", "1d12h").
type days time.Duration

func (d *days) String() string { return fmtDuration(time.Duration(*d)) }
func (d *days) Type() string   { return "duration" }

func (d *days) Set(s string) error {
	v, err := parseDays(s)
	if err != nil {
		return err
	}
	*d = days(v)
	return nil
}

func parseDays(s string) (time.Duration, error) {
	var total time.Duration
	rest := s
	if n, after, ok := strings.Cut(s, "d"); ok {
		k, err := strconv.Atoi(n)
		if err != nil || k < 0 {
			return 0, fmt.Errorf("%q: use a duration such as 7d, 36h or 1d12h", s)
		}
		total, rest = time.Duration(k)*24*time.Hour, after
	}
	if rest != "" {
		v, err := time.ParseDuration(rest)
		if err != nil {
			return 0, fmt.Errorf("%q: use a duration such as 7d, 36h or 1d12h", s)
		}
		total += v
	}
	if total <= 0 {
		return 0, fmt.Errorf("%q: give a positive duration", s)
	}
	return total, nil
}

// fmtDuration shows a duration in days, hours and minutes ("6d23h59m").
func fmtDuration(d time.Duration) string {
	if d < time.Minute {
		return d.Round(time.Second).String()
	}
	d = d.Truncate(time.Minute)
	var b strings.Builder
	if n := d / (24 * time.Hour); n > 0 {
		fmt.Fprintf(&b, "%dd", n)
		d -= n * 24 * time.Hour
	}
	if h := d / time.Hour; h > 0 {
		fmt.Fprintf(&b, "%dh", h)
		d -= h * time.Hour
	}
	if m := d / time.Minute; m > 0 {
		fmt.Fprintf(&b, "%dm", m)
	}
	return b.String()
}

func newRunsCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "runs",
		Short: "List the runs Redis holds, or delete one",
		Long: `runs shows an operator what Redis holds of each run (its status, examples,
keys and when they expire) and deletes a run's keys. A finished run's keys
expire by themselves (--retain, --retain-answers); an unfinished one's never
do, so that it can be resumed.`,
		Example: `  quorum runs list           # --redis-url or QUORUM_REDIS_URL names the Redis
  quorum runs delete RUN     # with --nats-url, its queued messages too`,
	}
	cmd.AddCommand(newRunsListCmd(), newRunsDeleteCmd())
	return cmd
}

// runsFlags registers the cluster flags quorum runs uses: Redis's, and
// with nats NATS's; the roles' other flags are hidden. --state-dir reaches
// the Redis that quorum run or serve keeps in a folder.
func runsFlags(cmd *cobra.Command, cf *clusterFlags, stateDir *string, nats bool) {
	cf.register(cmd, false)
	cmd.Flags().StringVar(stateDir, "state-dir", "", "the --state-dir of a quorum run (default <out>/.state) or serve (default ~/.local/state/quorum/serve) whose own Redis holds the runs: the running one's, or one started over its files for this command")
	unused := []string{"ack-wait", "max-deliver", "stream-replicas", "http-addr", "name", "log-level", "warehouses-config"}
	if !nats {
		unused = append(unused, "nats-url", "nats-creds", "nats-nkey", "nats-tls-ca", "nats-tls-cert", "nats-tls-key")
	}
	for _, name := range unused {
		_ = cmd.Flags().MarkHidden(name)
	}
}

// runsStore connects to the --redis-url Redis, or to the one kept under
// --state-dir.
func runsStore(cf *clusterFlags, stateDir string) (*runstate.Store, func(), error) {
	rdb, closeRedis, err := runsRedis(cf, stateDir)
	if err != nil {
		return nil, nil, err
	}
	return runstate.New(rdb), closeRedis, nil
}

// runsRedis is the client of the --redis-url Redis, or of the one kept
// under --state-dir.
func runsRedis(cf *clusterFlags, stateDir string) (*redis.Client, func(), error) {
	if stateDir != "" {
		if cf.redisURL != "" {
			return nil, nil, usage(errors.New("--state-dir and --redis-url: give one (--state-dir names the Redis of a quorum run or serve that had no --redis-url)"))
		}
		return stateDirRedis(stateDir)
	}
	if cf.redisURL == "" {
		return nil, nil, usage(errors.New("--redis-url is required (or QUORUM_REDIS_URL), or --state-dir for the Redis a quorum run or serve keeps in its state folder"))
	}
	opt, err := cf.redisOptions()
	if err != nil {
		return nil, nil, usage(err)
	}
	rdb := opt.Client()
	return rdb, func() { rdb.Close() }, nil
}

// stateDirRedis reaches the Redis under a state folder: the server a
// quorum process runs there, or else one this command starts over the
// folder's append-only file and stops when it is done.
func stateDirRedis(stateDir string) (*redis.Client, func(), error) {
	dir := filepath.Join(stateDir, "redis")
	if st, err := os.Stat(dir); err != nil || !st.IsDir() {
		return nil, nil, usage(fmt.Errorf("--state-dir %s has no redis folder: give the --state-dir of a quorum run (default <out>/.state) or serve (default ~/.local/state/quorum/serve)", stateDir))
	}
	url, err := localredis.Running(dir)
	if err != nil {
		return nil, nil, fmt.Errorf("--state-dir %s: %w", stateDir, err)
	}
	stop := func() {}
	if url == "" {
		pw := make([]byte, 16)
		_, _ = rand.Read(pw)
		srv, err := localredis.Start(localredis.Options{Dir: dir, AppendOnly: true, Password: hex.EncodeToString(pw)})
		if err != nil {
			return nil, nil, fmt.Errorf("--state-dir %s: %w", stateDir, err)
		}
		url, stop = srv.URL(), srv.Stop
	}
	opt, err := redisconn.Parse(url)
	if err != nil {
		stop()
		return nil, nil, fmt.Errorf("--state-dir %s: %w", stateDir, err)
	}
	rdb := opt.Client()
	return rdb, func() { rdb.Close(); stop() }, nil
}

func newRunsListCmd() *cobra.Command {
	var (
		cf        clusterFlags
		stateDir  string
		asJSON    bool
		questions bool
	)
	cmd := &cobra.Command{
		Use:   "list [DIR...]",
		Short: "List the runs in Redis (status, examples, created, keys, expiry), or the run folders under DIRs",
		Long: `list shows the runs Redis holds: their status, examples, keys and when
they expire. Given folders, it lists instead the runs written under them
(each folder holding a run.json, up to four levels down; hidden folders such
as a run's .state are not entered): an index of the runs kept on disk, with
agent, dataset, seed, examples answered, EX where gold scored them, LLM
calls, money and start. quorum compare sets two of them side by side.`,
		Example: `  quorum runs list --redis-url redis://redis:6379/0 --questions
  quorum runs list --state-dir out/run-1/.state   # the Redis a quorum run kept there
  quorum runs list out/                           # the run folders under out/`,
		RunE: func(cmd *cobra.Command, dirs []string) error {
			if len(dirs) > 0 {
				if cf.redisURL != "" || stateDir != "" || questions {
					return usage(errors.New("folders list the runs written there; --redis-url, --state-dir and --questions list those in Redis: give one or the other"))
				}
				return listRunFolders(cmd.OutOrStdout(), dirs, asJSON)
			}
			st, closeStore, err := runsStore(&cf, stateDir)
			if err != nil {
				return err
			}
			defer closeStore()
			runs, err := st.Runs(cmd.Context())
			if err != nil {
				return err
			}
			var shown []runstate.RunInfo
			hidden, hiddenKeys := 0, 0
			for _, r := range runs {
				if r.Interactive && !questions {
					hidden, hiddenKeys = hidden+1, hiddenKeys+r.Keys
					continue
				}
				shown = append(shown, r)
			}
			if asJSON {
				enc := json.NewEncoder(cmd.OutOrStdout())
				enc.SetIndent("", "  ")
				return enc.Encode(append([]runstate.RunInfo{}, shown...))
			}
			printRuns(cmd.OutOrStdout(), shown)
			if hidden > 0 {
				fmt.Fprintf(cmd.OutOrStdout(), "and %d question runs (quorum serve) with %d keys: --questions lists them\n", hidden, hiddenKeys)
			}
			return nil
		},
	}
	runsFlags(cmd, &cf, &stateDir, false)
	cmd.Flags().BoolVar(&asJSON, "json", false, "print the runs as JSON")
	cmd.Flags().BoolVar(&questions, "questions", false, "list quorum serve's question runs too")
	return cmd
}

// listRunFolders lists the runs written under dirs.
func listRunFolders(w io.Writer, dirs []string, asJSON bool) error {
	runs, err := compare.Find(dirs)
	if err != nil {
		return usage(err)
	}
	if asJSON {
		enc := json.NewEncoder(w)
		enc.SetIndent("", "  ")
		return enc.Encode(append([]compare.Listed{}, runs...))
	}
	if len(runs) == 0 {
		_, err := fmt.Fprintf(w, "no run folder (one holding a run.json) under %s\n", strings.Join(dirs, ", "))
		return err
	}
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "FOLDER\tRUN\tAGENT\tDATASET\tSEED\tANSWERED\tEX\tLLM CALLS\tMONEY\tSTARTED")
	for _, r := range runs {
		ex := "-"
		if r.EX != nil {
			ex = fmt.Sprintf("%.1f%%", 100**r.EX)
		}
		started := "-"
		if !r.Started.IsZero() {
			started = r.Started.UTC().Format("2006-01-02 15:04")
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%d\t%d/%d\t%s\t%d\t%.4f\t%s\n", r.Dir, r.RunID, r.Agent, filepath.Base(r.Dataset), r.Seed,
			r.Answered, r.Examples, ex, r.LLMCalls, r.Money, started)
	}
	return tw.Flush()
}

// printRuns writes the runs as a table; TTL is when the run's state
// expires and when its last key does ("never" while any key has no
// expiry).
func printRuns(w io.Writer, runs []runstate.RunInfo) {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "RUN\tSTATUS\tAGENT\tEXAMPLES\tCREATED\tKEYS\tSIZE\tTTL")
	for _, r := range runs {
		created := "-"
		if !r.Created.IsZero() {
			created = r.Created.UTC().Format("2006-01-02 15:04")
		}
		ttl := "never"
		switch {
		case r.Persistent > 0 && r.Persistent < r.Keys:
			ttl = fmt.Sprintf("never (%d of %d keys)", r.Persistent, r.Keys)
		case r.Persistent == 0 && r.MinTTL == r.MaxTTL:
			ttl = fmtDuration(r.MaxTTL)
		case r.Persistent == 0:
			ttl = fmtDuration(r.MinTTL) + ", answers " + fmtDuration(r.MaxTTL)
		}
		agent := r.Agent
		if r.Interactive {
			agent += " (question)"
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%d/%d\t%s\t%d\t%s\t%s\n", r.Run, r.Status, agent, r.Final, r.Examples, created, r.Keys, fmtBytes(r.Bytes), ttl)
	}
	tw.Flush()
}

func fmtBytes(n int64) string {
	switch {
	case n >= 1<<20:
		return fmt.Sprintf("%.1f MB", float64(n)/(1<<20))
	case n >= 1<<10:
		return fmt.Sprintf("%.1f KB", float64(n)/(1<<10))
	}
	return fmt.Sprintf("%d B", n)
}

func newRunsDeleteCmd() *cobra.Command {
	var (
		cf       clusterFlags
		stateDir string
		force    bool
	)
	cmd := &cobra.Command{
		Use:   "delete RUN",
		Short: "Delete a run's keys (and, with --nats-url, its queued messages); an unfinished run only with --force",
		Args:  cobra.ExactArgs(1),
		Example: `  quorum runs delete run-20261126-115229 --redis-url redis://redis:6379/0
  quorum runs delete RUN --force --redis-url … --nats-url …   # a run still running or resumable`,
		RunE: func(cmd *cobra.Command, args []string) error {
			ctx, run := cmd.Context(), args[0]
			if err := queue.CheckToken("run id", run); err != nil {
				return usage(err)
			}
			st, closeStore, err := runsStore(&cf, stateDir)
			if err != nil {
				return err
			}
			defer closeStore()
			info, err := st.Describe(ctx, run)
			if err != nil {
				return err
			}
			if info.Status == runstate.StatusUnfinished && !force {
				return fmt.Errorf("run %s is unfinished (%d of %d examples final): it may be running now or be resumed; --force deletes it anyway", run, info.Final, info.Examples)
			}
			purged, err := purgeRun(ctx, &cf, run)
			if err != nil {
				return err
			}
			n, err := st.Delete(ctx, run)
			if err != nil {
				return err
			}
			fmt.Fprintf(cmd.OutOrStdout(), "Deleted run %s (%s): %d keys", run, info.Status, n)
			if cf.natsURL == "" {
				fmt.Fprintln(cmd.OutOrStdout(), "; its messages in NATS, if any, stay (pass --nats-url to purge them).")
			} else {
				fmt.Fprintf(cmd.OutOrStdout(), ", %d queued messages.\n", purged)
			}
			return nil
		},
	}
	runsFlags(cmd, &cf, &stateDir, true)
	cmd.Flags().BoolVar(&force, "force", false, "delete a run that is not finished (running, or interrupted and resumable)")
	return cmd
}

// purgeRun purges run's subjects and its coordinator's consumer when
// --nats-url is given: before its keys go, so no worker picks up a task
// of a run whose state is gone.
func purgeRun(ctx context.Context, cf *clusterFlags, run string) (uint64, error) {
	if cf.natsURL == "" {
		return 0, nil
	}
	opts, err := cf.natsOptions()
	if err != nil {
		return 0, usage(err)
	}
	q, err := queue.Connect(ctx, cf.natsURL, queue.Config{}, opts...)
	if err != nil {
		return 0, err
	}
	defer q.Close()
	n, err := q.PurgeRun(ctx, run)
	if err != nil {
		return 0, err
	}
	return n, q.DeleteConsumer(ctx, "coordinator-"+run)
}
