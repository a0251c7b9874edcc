package cli

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"

	"github.com/spf13/cobra"

	"github.com/quorumsql/quorum/internal/blob"
	"github.com/quorumsql/quorum/internal/runtime/runstate"
	"github.com/quorumsql/quorum/pkg/dataset"
	"github.com/quorumsql/quorum/pkg/outputs"
	"github.com/quorumsql/quorum/pkg/trace"
)

func newTraceCmd() *cobra.Command {
	var (
		cf                 clusterFlags
		stateDir           string
		runID, ex, out     string
		asJSON, full, list bool
	)
	cmd := &cobra.Command{
		Use:   "trace --out DIR --example ID | --run ID --example ID",
		Short: "Show what the agent did for one example: its tasks, LLM calls, queries, votes and answer",
		Long: `trace prints one example's trace as a tree in time order: the agent's start,
each task (its kind, pool, worker and delivery) with the LLM calls it made
(role, model, tokens, time, the prompt and the reply) and the queries it ran
(SQL, status, rows and the first of them), each decision of the voter (the
candidates grouped by equal results, the winner, the confidence) and the
final answer. Texts are cut to one line; --full prints them whole, --json
prints the whole trace as JSON.

A run's trace is kept by --trace (full by default for quorum run, summary for
quorum serve): in the run's output folder (traces/<id>.json.gz, read with --out)
and in Redis for the run's state retention (read with --run and --redis-url,
or --state-dir for the Redis a quorum run keeps in its output folder).`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			ctx := cmd.Context()
			if out != "" && runID != "" {
				return usage(errors.New("--out and --run: give one (--out reads the traces a run wrote to its output folder, --run the ones in Redis)"))
			}
			if out == "" && runID == "" {
				return usage(errors.New("give --out DIR (a run's output folder) or --run ID (a run in Redis, with --redis-url or --state-dir)"))
			}
			if list || ex == "" {
				ids, err := traceIDs(ctx, &cf, stateDir, out, runID)
				if err != nil {
					return err
				}
				if !list {
					return usage(fmt.Errorf("--example is required; the run's examples: %s", strings.Join(first(ids, 20), ", ")))
				}
				for _, id := range ids {
					fmt.Fprintln(cmd.OutOrStdout(), id)
				}
				return nil
			}
			if err := dataset.CheckName(ex); err != nil {
				return usage(fmt.Errorf("--example: %w", err))
			}
			var x *trace.Export
			var err error
			if out != "" {
				x, err = traceFromOut(out, ex)
			} else {
				x, err = traceFromRedis(ctx, &cf, stateDir, runID, ex)
			}
			if err != nil {
				return err
			}
			x.Resolve()
			if asJSON {
				enc := json.NewEncoder(cmd.OutOrStdout())
				enc.SetIndent("", "  ")
				return enc.Encode(x)
			}
			return trace.Render(cmd.OutOrStdout(), x, trace.RenderOptions{Full: full})
		},
	}
	runsFlags(cmd, &cf, &stateDir, false)
	fl := cmd.Flags()
	fl.StringVar(&out, "out", "", "a run's output folder (its traces/ folder)")
	fl.StringVar(&runID, "run", "", "a run id whose trace Redis holds")
	fl.StringVar(&ex, "example", "", "the example (instance id)")
	fl.BoolVar(&asJSON, "json", false, "print the trace as JSON")
	fl.BoolVar(&full, "full", false, "print prompts, replies, SQL and rows whole")
	fl.BoolVar(&list, "list", false, "list the examples that have a trace")
	for _, n := range []string{"concurrency", "max-held", "warehouses", "llm-rpm", "llm-tpm", "warehouse-qps", "warehouse-concurrency", "otlp-endpoint", "otlp-content"} {
		_ = fl.MarkHidden(n)
	}
	return cmd
}

// traceFromOut reads the trace a run wrote to its output folder.
func traceFromOut(out, ex string) (*trace.Export, error) {
	path := filepath.Join(out, outputs.TracesDir, outputs.TraceFile(ex))
	b, err := outputs.ReadTrace(out, ex)
	if errors.Is(err, os.ErrNotExist) {
		if _, serr := os.Stat(filepath.Join(out, outputs.TracesDir)); serr != nil {
			return nil, usage(fmt.Errorf("--out %s has no %s folder: the run kept no trace (--trace none) or is not a quorum run's output folder", out, outputs.TracesDir))
		}
		return nil, usage(fmt.Errorf("--out %s has no trace of example %s (quorum trace --out %s --list lists those it has)", out, ex, out))
	}
	if err != nil {
		return nil, fmt.Errorf("trace %s: %w", path, err)
	}
	var x trace.Export
	if err := json.Unmarshal(b, &x); err != nil {
		return nil, fmt.Errorf("trace %s: %w", path, err)
	}
	return &x, nil
}

// traceFromRedis reads an example's trace from the run's state.
func traceFromRedis(ctx context.Context, cf *clusterFlags, stateDir, run, ex string) (*trace.Export, error) {
	rdb, closeRedis, err := runsRedis(cf, stateDir)
	if err != nil {
		return nil, err
	}
	defer closeRedis()
	st := runstate.New(rdb)
	m, err := st.Manifest(ctx, run)
	if errors.Is(err, runstate.ErrNoRun) {
		return nil, usage(fmt.Errorf("--run %s: Redis holds no such run (quorum runs list shows those it holds)", run))
	}
	if err != nil {
		return nil, err
	}
	store := &trace.Store{Lists: st, Blobs: blob.New(rdb, 0)}
	x, err := store.Export(ctx, run, ex)
	if err != nil {
		return nil, err
	}
	if len(x.Entries) == 0 && !contains(m.Examples, ex) {
		return nil, usage(fmt.Errorf("--example %s is not an example of run %s", ex, run))
	}
	x.Agent, x.Level = m.Agent, m.Trace
	return x, nil
}

// traceIDs lists the examples with a trace.
func traceIDs(ctx context.Context, cf *clusterFlags, stateDir, out, run string) ([]string, error) {
	if out != "" {
		files, err := filepath.Glob(filepath.Join(out, outputs.TracesDir, outputs.TraceFile("*")))
		if err != nil || len(files) == 0 {
			return nil, usage(fmt.Errorf("--out %s has no traces: the run kept no trace (--trace none) or is not a quorum run's output folder", out))
		}
		ids := make([]string, len(files))
		for i, f := range files {
			ids[i] = strings.TrimSuffix(filepath.Base(f), outputs.TraceFile(""))
		}
		sort.Strings(ids)
		return ids, nil
	}
	st, closeStore, err := runsStore(cf, stateDir)
	if err != nil {
		return nil, err
	}
	defer closeStore()
	m, err := st.Manifest(ctx, run)
	if errors.Is(err, runstate.ErrNoRun) {
		return nil, usage(fmt.Errorf("--run %s: Redis holds no such run (quorum runs list shows those it holds)", run))
	}
	if err != nil {
		return nil, err
	}
	return m.Examples, nil
}

func first(ids []string, n int) []string {
	if len(ids) > n {
		return append(ids[:n:n], fmt.Sprintf("… (%d in all; --list lists them)", len(ids)))
	}
	return ids
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}
