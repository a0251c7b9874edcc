package cli

import (
	"encoding/json"
	"fmt"
	"io"
	"strings"
	"text/tabwriter"

	"github.com/spf13/cobra"

	"github.com/quorumsql/quorum/pkg/dataset"
	"github.com/quorumsql/quorum/pkg/eval"
	"github.com/quorumsql/quorum/pkg/warehouse/sqlite"
)

func newEvalCmd() *cobra.Command {
	var (
		df                            datasetFlags
		goldDir, predDir, mode, dsDir string
		asJSON                        bool
	)
	cmd := &cobra.Command{
		Use:   "eval --gold GOLD_DIR --pred PRED_DIR",
		Short: "Score predictions with Spider 2.0's official rules",
		Long: `eval scores predictions exactly as Spider 2.0's evaluate.py (lite) does:
pandas-style CSV typing, missing values as 0, numbers within 0.01, columns
matched by values, condition_cols, ignore_order and gold variants _a/_b/...

GOLD_DIR holds one *_eval.jsonl and exec_result/. PRED_DIR holds
<instance_id>.csv (exec_result mode) or <instance_id>.sql (sql mode, executed
on the example's database found through --dataset).`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if goldDir == "" || predDir == "" {
				return fmt.Errorf("both --gold and --pred are required")
			}
			m, err := eval.ParseMode(mode)
			if err != nil {
				return fmt.Errorf("--mode: %w", err)
			}
			cfg := eval.Config{GoldDir: goldDir, PredDir: predDir, Mode: m}
			if m == eval.ModeSQL {
				if dsDir == "" {
					return fmt.Errorf("sql mode executes each prediction on its database: pass --dataset DIR")
				}
				ds, err := df.load(dsDir)
				if err != nil {
					return err
				}
				set := &sqlite.Set{}
				defer set.Close()
				cfg.Runner = &dataset.Warehouses{DS: ds, SQLite: set}
			}
			rep, err := eval.Evaluate(cmd.Context(), cfg)
			if err != nil {
				return err
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
	cmd.Flags().StringVar(&goldDir, "gold", "", "gold folder with *_eval.jsonl and exec_result/")
	cmd.Flags().StringVar(&predDir, "pred", "", "folder of predictions (<instance_id>.csv or .sql)")
	cmd.Flags().StringVar(&mode, "mode", string(eval.ModeExecResult), "exec_result or sql")
	cmd.Flags().StringVar(&dsDir, "dataset", "", "dataset folder (sql mode): where each example's database is")
	cmd.Flags().BoolVar(&asJSON, "json", false, "print the scores as JSON")
	return cmd
}

func printReport(w io.Writer, rep *eval.Report) {
	tw := tabwriter.NewWriter(w, 2, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "INSTANCE\tSCORE\tERROR")
	for _, s := range rep.Instances {
		fmt.Fprintf(tw, "%s\t%d\t%s\n", s.InstanceID, s.Score, s.Error)
	}
	tw.Flush()
	for _, f := range rep.Ignored {
		fmt.Fprintf(w, "ignored %s: its instance is not in the eval config\n", f)
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
