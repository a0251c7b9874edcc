package cli

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"github.com/quorumsql/quorum/pkg/warehouse/localdb"
	"io"
	"os"
	"path/filepath"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/quorumsql/quorum/pkg/dataset"
	"github.com/quorumsql/quorum/pkg/eval"
	"github.com/quorumsql/quorum/pkg/outputs"
	"github.com/quorumsql/quorum/pkg/warehouse/sqlite"
)

// Metrics of quorum eval.
const (
	metricSpider2 = "spider2"
	metricBird    = "bird"
)

// birdQueryTimeout is BIRD's evaluation.py meta_time_out: a query that runs
// longer scores 0.
const birdQueryTimeout = 30 * time.Second

// evalQueryTimeout is --query-timeout's default: how long one predicted
// query may run in sql mode before it is interrupted and scored 0.
const evalQueryTimeout = 60 * time.Second

// evalWarehouses is the runner of sql mode: each example's SQLite database,
// queries interrupted after timeout and their results capped at
// eval.ResultLimits (a result beyond them scores 0 as too large rather
// than being compared cut).
func evalWarehouses(ds *dataset.Dataset, timeout time.Duration) (*localdb.Warehouses, *sqlite.Set) {
	set := &sqlite.Set{Base: sqlite.Config{QueryTimeout: timeout}}
	return &localdb.Warehouses{DS: ds, SQLite: set, Limits: eval.ResultLimits}, set
}

func newEvalCmd() *cobra.Command {
	var (
		df                                    datasetFlags
		goldDir, predDir, mode, dsDir, metric string
		asJSON, bestOfN                       bool
		queryTimeout                          time.Duration
	)
	cmd := &cobra.Command{
		Use:   "eval --gold GOLD_DIR --pred PRED_DIR",
		Short: "Score predictions with Spider 2.0's or BIRD's official rules",
		Long: `eval scores predictions exactly as Spider 2.0's evaluate.py (lite) does:
pandas-style CSV typing, missing values as 0, numbers within 0.01, columns
matched by values, condition_cols, ignore_order and gold variants _a/_b/...

GOLD_DIR holds one *_eval.jsonl and exec_result/. PRED_DIR holds
<instance_id>.csv (exec_result mode) or <instance_id>.sql (sql mode, executed
on the example's database found through --dataset).

With --metric bird it scores as BIRD's evaluation.py does: an example is
right when the set of predicted rows equals the set of gold rows (order and
duplicates ignored, NULL equal to NULL, 1 equal to 1.0, strings exact). In
sql mode the prediction <instance_id>.sql and the example's gold SQL from the
dataset (--dataset, a BIRD folder with dev.json and dev_databases/; --gold
may name the same folder or its task file) both run on the example's SQLite
database, each for at most 30 s (or --query-timeout). Instance ids are
<task file stem>_<question_id>, e.g. dev_0. In exec_result mode GOLD_DIR holds <instance_id>.csv gold results
(directly or in exec_result/), and --dataset, when given, supplies the
difficulties. The report adds BIRD's breakdown by difficulty (simple,
moderate, challenging) when the examples have one.

With --metric bird --best-of-n, PRED_DIR is a run's output folder: besides
the final answers it scores each example's candidates in
candidates/<instance_id>/ (r<round>_c<index>.sql, or .csv in exec_result mode),
and reports Best-of-N — the share of examples whose final answer or any
candidate is right, the RAISE paper's headline metric — next to EX, by
difficulty too.

Hostile inputs are bounded: in sql mode a query runs at most --query-timeout
and may return at most 500,000 rows and 32 MiB of values; a CSV (file or
rendered result) may hold at most 64 MiB and 5 million cells; matching one
prediction against its gold tables may take at most 5×10^8 value
comparisons. An instance beyond a bound scores 0 with a "result too large"
or "interrupted" error; the others are scored as usual.`,
		Args: usageArgs(cobra.NoArgs),
		RunE: func(cmd *cobra.Command, _ []string) error {
			m, err := eval.ParseMode(mode)
			if err != nil {
				return usage(fmt.Errorf("--mode: %w", err))
			}
			if queryTimeout <= 0 {
				return usage(fmt.Errorf("--query-timeout %s: must be positive (e.g. 60s)", queryTimeout))
			}
			switch metric {
			case metricSpider2:
			case metricBird:
				// BIRD's own timeout applies unless the flag is given.
				if !cmd.Flags().Changed("query-timeout") {
					queryTimeout = birdQueryTimeout
				}
				return runBirdEval(cmd, &df, goldDir, predDir, dsDir, m, asJSON, bestOfN, queryTimeout)
			default:
				return usage(fmt.Errorf("--metric: unknown metric %q: use spider2 or bird", metric))
			}
			if bestOfN {
				return usage(fmt.Errorf("--best-of-n scores candidates under BIRD's execution accuracy: use it with --metric bird (run.json's correct_at_k is Spider 2.0's EX@k)"))
			}
			if goldDir == "" || predDir == "" {
				return usage(errors.New("both --gold and --pred are required"))
			}
			cfg := eval.Config{GoldDir: goldDir, PredDir: predDir, Mode: m}
			if m == eval.ModeSQL {
				if dsDir == "" {
					return usage(errors.New("sql mode executes each prediction on its database: pass --dataset DIR"))
				}
				ds, err := df.load(dsDir)
				if err != nil {
					return usage(err)
				}
				wh, set := evalWarehouses(ds, queryTimeout)
				defer set.Close()
				cfg.Runner, cfg.ResultLimits = wh, wh.Limits
			}
			rep, err := eval.Evaluate(cmd.Context(), cfg)
			if err != nil {
				return inputError(cmd.Context(), err)
			}
			if asJSON {
				if rep.Instances == nil {
					rep.Instances = []eval.InstanceScore{}
				}
				enc := json.NewEncoder(cmd.OutOrStdout())
				return enc.Encode(rep)
			}
			printReport(cmd.OutOrStdout(), rep)
			return nil
		},
	}
	df.register(cmd)
	cmd.Flags().StringVar(&goldDir, "gold", "", "gold folder with *_eval.jsonl and exec_result/ (bird: gold CSVs, or in sql mode the dataset folder)")
	cmd.Flags().StringVar(&predDir, "pred", "", "folder of predictions (<instance_id>.csv or .sql)")
	cmd.Flags().StringVar(&mode, "mode", string(eval.ModeExecResult), "exec_result or sql")
	cmd.Flags().StringVar(&dsDir, "dataset", "", "dataset folder (sql mode): where each example's database is")
	cmd.Flags().StringVar(&metric, "metric", metricSpider2, "scoring rules: spider2 (Spider 2.0's evaluate.py) or bird (BIRD's execution accuracy)")
	cmd.Flags().BoolVar(&asJSON, "json", false, "print the scores as JSON")
	cmd.Flags().BoolVar(&bestOfN, "best-of-n", false, "--metric bird: also score every candidate of a run's output folder (candidates/<instance_id>/) and report Best-of-N, an example right when any candidate is")
	cmd.Flags().DurationVar(&queryTimeout, "query-timeout", evalQueryTimeout, "sql mode: interrupt a query after this long and score it 0 (--metric bird: default 30s, BIRD's own)")
	return cmd
}

// runBirdEval is quorum eval --metric bird.
func runBirdEval(cmd *cobra.Command, df *datasetFlags, goldDir, predDir, dsDir string, m eval.Mode, asJSON, bestOfN bool, queryTimeout time.Duration) error {
	if predDir == "" {
		return usage(errors.New("--pred is required"))
	}
	cfg := eval.BirdConfig{PredDir: predDir, Mode: m, Workers: 4}
	if bestOfN {
		cfg.CandidatesDir = filepath.Join(predDir, outputs.CandidatesDir)
		if st, err := os.Stat(cfg.CandidatesDir); err != nil || !st.IsDir() {
			return usage(fmt.Errorf("--best-of-n: %s has no %s/ folder: pass a run's output folder (quorum run and the coordinator write each example's candidates there)", predDir, outputs.CandidatesDir))
		}
	}
	var ds *dataset.Dataset
	switch m {
	case eval.ModeSQL:
		root, err := birdDatasetRoot(df, goldDir, dsDir)
		if err != nil {
			return usage(err)
		}
		if ds, err = df.load(root); err != nil {
			return usage(err)
		}
		for _, e := range ds.Examples {
			if strings.TrimSpace(e.Gold.SQL) != "" {
				cfg.Tasks = append(cfg.Tasks, eval.BirdTask{InstanceID: e.ID, GoldSQL: e.Gold.SQL, Difficulty: e.Difficulty})
			}
		}
		if len(cfg.Tasks) == 0 {
			return usage(fmt.Errorf("dataset %s has no example with gold SQL (BIRD's \"SQL\" or Spider's \"query\")", root))
		}
		wh, set := evalWarehouses(ds, queryTimeout)
		defer set.Close()
		cfg.Runner, cfg.ResultLimits = wh, wh.Limits
	case eval.ModeExecResult:
		if goldDir == "" {
			return usage(errors.New("exec_result mode compares CSVs: pass --gold DIR with the gold <instance_id>.csv results"))
		}
		cfg.GoldDir = goldDir
		if dsDir != "" {
			var err error
			if ds, err = df.load(dsDir); err != nil {
				return usage(err)
			}
			for _, e := range ds.Examples {
				cfg.Tasks = append(cfg.Tasks, eval.BirdTask{InstanceID: e.ID, GoldSQL: e.Gold.SQL, Difficulty: e.Difficulty})
			}
		}
	}
	rep, err := eval.EvaluateBird(cmd.Context(), cfg)
	if err != nil {
		return inputError(cmd.Context(), err)
	}
	if asJSON {
		if rep.Instances == nil {
			rep.Instances = []eval.InstanceScore{}
		}
		return json.NewEncoder(cmd.OutOrStdout()).Encode(rep)
	}
	why := "its instance is not a gold example of the dataset"
	if m == eval.ModeExecResult {
		why = "its instance has no gold CSV"
	}
	printReportAs(cmd.OutOrStdout(), &rep.Report, why)
	printDifficulties(cmd.OutOrStdout(), rep.ByDifficulty)
	if rep.BestOfN != nil {
		printBestOfN(cmd.OutOrStdout(), rep.BestOfN)
	}
	return nil
}

// printBestOfN prints each example's Best-of-N verdict and the totals, by
// difficulty when known.
func printBestOfN(w io.Writer, b *eval.BestOfN) {
	fmt.Fprintln(w, "\nBest-of-N (an example is right when its final answer or any candidate is):")
	tw := tabwriter.NewWriter(w, 2, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "INSTANCE\tCANDIDATES\tSCORE\tRIGHT")
	for _, s := range b.Instances {
		fmt.Fprintf(tw, "%s\t%d\t%d\t%s\n", s.InstanceID, s.Candidates, s.Score, s.CorrectBy)
	}
	tw.Flush()
	fmt.Fprintf(w, "\nBest-of-N: %.4f (%d of %d examples with an answer or a candidate)\n", b.EX, b.Correct, b.Total)
	if b.Total < b.Gold {
		fmt.Fprintf(w, "Best-of-N over all %d gold examples, the missing scored wrong: %.4f\n", b.Gold, b.EXAllGold)
	}
	printDifficulties(w, b.ByDifficulty)
}

// birdDatasetRoot picks the dataset of a BIRD sql-mode evaluation: --dataset,
// else --gold. --gold may also name the task file (dev.json), which then
// selects it as --tasks would.
func birdDatasetRoot(df *datasetFlags, goldDir, dsDir string) (string, error) {
	if goldDir != "" {
		st, err := os.Stat(goldDir)
		if err != nil {
			return "", fmt.Errorf("--gold: %w", err)
		}
		if !st.IsDir() {
			if df.tasks == "" {
				df.tasks = goldDir
			}
			if dsDir == "" {
				dsDir = filepath.Dir(goldDir)
			}
		} else if dsDir != "" && !samePath(goldDir, dsDir) {
			return "", fmt.Errorf("BIRD's sql mode reads the gold SQL from the dataset: --gold %s and --dataset %s must be the same folder (or pass only --dataset)", goldDir, dsDir)
		} else if dsDir == "" {
			dsDir = goldDir
		}
	}
	if dsDir == "" {
		return "", fmt.Errorf("BIRD's sql mode runs the predicted and the gold SQL on each example's database: pass --dataset DIR (the folder with dev.json and dev_databases/)")
	}
	return dsDir, nil
}

func samePath(a, b string) bool {
	aa, err1 := filepath.Abs(a)
	bb, err2 := filepath.Abs(b)
	if err1 != nil || err2 != nil {
		return filepath.Clean(a) == filepath.Clean(b)
	}
	if aa == bb {
		return true
	}
	sa, err1 := os.Stat(aa)
	sb, err2 := os.Stat(bb)
	return err1 == nil && err2 == nil && os.SameFile(sa, sb)
}

// printDifficulties prints BIRD's accuracy table by difficulty, over all gold
// examples (missing predictions scored wrong).
func printDifficulties(w io.Writer, scores []eval.DifficultyScore) {
	if len(scores) == 0 {
		return
	}
	fmt.Fprintln(w)
	tw := tabwriter.NewWriter(w, 2, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "DIFFICULTY\tCOUNT\tCORRECT\tEX")
	correct, total := 0, 0
	for _, d := range scores {
		fmt.Fprintf(tw, "%s\t%d\t%d\t%.4f\n", d.Difficulty, d.Gold, d.Correct, d.EX)
		correct += d.Correct
		total += d.Gold
	}
	if total > 0 {
		fmt.Fprintf(tw, "total\t%d\t%d\t%.4f\n", total, correct, float64(correct)/float64(total))
	}
	tw.Flush()
}

func printReport(w io.Writer, rep *eval.Report) {
	printReportAs(w, rep, "its instance is not in the eval config")
}

// printReportAs prints a report, saying why ignored files were ignored.
func printReportAs(w io.Writer, rep *eval.Report, ignoredWhy string) {
	tw := tabwriter.NewWriter(w, 2, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "INSTANCE\tSCORE\tERROR")
	for _, s := range rep.Instances {
		fmt.Fprintf(tw, "%s\t%d\t%s\n", s.InstanceID, s.Score, s.Error)
	}
	tw.Flush()
	for _, f := range rep.Ignored {
		fmt.Fprintf(w, "ignored %s: %s\n", f, ignoredWhy)
	}
	if len(rep.Missing) > 0 {
		more := ""
		if len(rep.Missing) > 10 {
			more = ", …"
		}
		fmt.Fprintf(w, "missing: %d of %d gold examples have no prediction (%s%s)\n", len(rep.Missing), rep.Gold,
			strings.Join(rep.Missing[:min(len(rep.Missing), 10)], ", "), more)
	}
	fmt.Fprintf(w, "\nEX: %.4f (%d of %d correct)\n", rep.EX, rep.Correct, rep.Total)
	if len(rep.Missing) > 0 {
		fmt.Fprintf(w, "EX over all %d gold examples, the missing scored wrong: %.4f\n", rep.Gold, rep.EXAllGold)
	}
}

// usageArgs makes a wrong number of arguments a usage error (exit 2), as
// a wrong flag is.
func usageArgs(check cobra.PositionalArgs) cobra.PositionalArgs {
	return func(cmd *cobra.Command, args []string) error { return usage(check(cmd, args)) }
}

// inputError is how an evaluation that could not run ends: its inputs
// (the folders, their files) are what it failed on, exit 2, unless it was
// interrupted.
func inputError(ctx context.Context, err error) error {
	if ctx.Err() != nil {
		return &exitError{code: exitAborted, msg: err.Error()}
	}
	return usage(err)
}
