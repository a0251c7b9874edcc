package cli

import (
	"fmt"
	"io"
	"sort"
	"strings"
	"text/tabwriter"

	"github.com/spf13/cobra"

	"github.com/quorumsql/quorum/pkg/dataset"
	"github.com/quorumsql/quorum/pkg/warehouse"
)

// datasetFlags are the loading options shared by commands that read a
// dataset.
type datasetFlags struct {
	tasks     string
	sqliteDir string
	dialect   string
}

func (f *datasetFlags) register(cmd *cobra.Command) {
	cmd.Flags().StringVar(&f.tasks, "tasks", "", "task file to read when the dataset root holds several")
	cmd.Flags().StringVar(&f.sqliteDir, "sqlite-dir", "", "folder searched first for <db>.sqlite files")
	cmd.Flags().StringVar(&f.dialect, "dialect", "", "override the dialect derived from instance ids (sqlite, snowflake, bigquery)")
}

func (f *datasetFlags) load(dir string) (*dataset.Dataset, error) {
	opt := dataset.Options{TaskFile: f.tasks, SQLiteDir: f.sqliteDir}
	if f.dialect != "" {
		d, err := warehouse.ParseDialect(f.dialect)
		if err != nil {
			return nil, fmt.Errorf("--dialect: %w", err)
		}
		opt.Dialect = d
	}
	return dataset.Load(dir, opt)
}

func newInspectCmd() *cobra.Command {
	var df datasetFlags
	var strict, prompts, asJSON bool
	var model string
	var show []string
	cmd := &cobra.Command{
		Use:   "inspect DATASET",
		Short: "Report a dataset's examples per dialect and database, and every problem in it",
		Long: `inspect loads a dataset folder (Spider 2.0 layout, or Spider 1.0/BIRD with
dev.json and database/) and reports how many examples it has per dialect and
database, what metadata and gold each database has, and every problem found:
malformed task lines, unknown databases, missing documents or sqlite files.
It lists all problems rather than stopping at the first.

With --prompts it reports the size of each example's ReFoRCE prompt before
compression and after table grouping and the oversize rules (schema linking,
which needs an LLM, is not applied), and their distribution per dialect.`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			ds, err := df.load(args[0])
			if err != nil {
				return err
			}
			if len(show) > 0 {
				return showPrompts(cmd.Context(), cmd.OutOrStdout(), ds, show)
			}
			if prompts {
				sizes, problems := promptSizes(cmd.Context(), ds, model)
				return printPromptSizes(cmd.OutOrStdout(), sizes, problems, asJSON)
			}
			printInspect(cmd.OutOrStdout(), ds)
			if strict && len(ds.Problems) > 0 {
				return &exitError{code: 2, msg: fmt.Sprintf("%d problems in %s", len(ds.Problems), args[0])}
			}
			return nil
		},
	}
	df.register(cmd)
	cmd.Flags().BoolVar(&strict, "strict", false, "exit with status 2 when any problem is found")
	cmd.Flags().BoolVar(&prompts, "prompts", false, "report each example's ReFoRCE prompt size before and after compression")
	cmd.Flags().BoolVar(&asJSON, "json", false, "with --prompts: one JSON object per example")
	cmd.Flags().StringVar(&model, "model", "gpt-4o", "with --prompts: model whose tokenizer counts tokens")
	cmd.Flags().StringSliceVar(&show, "show-prompt", nil, "print the ReFoRCE generation prompt these examples get (comma-separated ids)")
	return cmd
}

func printInspect(w io.Writer, ds *dataset.Dataset) {
	runnable := 0
	byDialect := map[warehouse.Dialect]int{}
	byDB := map[string]int{}
	goldSQL, goldRes, goldSpec := 0, 0, 0
	for _, e := range ds.Examples {
		if ds.Runnable(e.ID) {
			runnable++
		}
		byDialect[e.Dialect]++
		byDB[string(e.Dialect)+"/"+e.DB]++
		if e.Gold.SQL != "" {
			goldSQL++
		}
		if len(e.Gold.Results) > 0 {
			goldRes++
		}
		if e.Gold.HasSpec {
			goldSpec++
		}
	}
	fmt.Fprintf(w, "Dataset %s (%s layout, tasks %s)\n", ds.Root, ds.Layout, ds.TaskFile)
	fmt.Fprintf(w, "Examples: %d, runnable %d\n", len(ds.Examples), runnable)
	fmt.Fprintf(w, "Gold: %d with SQL, %d with result CSVs, %d in the eval config\n\n", goldSQL, goldRes, goldSpec)

	tw := tabwriter.NewWriter(w, 2, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "DIALECT\tEXAMPLES")
	var dialects []string
	for d := range byDialect {
		dialects = append(dialects, string(d))
	}
	sort.Strings(dialects)
	for _, d := range dialects {
		fmt.Fprintf(tw, "%s\t%d\n", d, byDialect[warehouse.Dialect(d)])
	}
	tw.Flush()
	fmt.Fprintln(w)

	tw = tabwriter.NewWriter(w, 2, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "DATABASE\tEXAMPLES\tTABLES\tCOLUMNS\tSQLITE FILE")
	keys := make([]string, 0, len(byDB))
	for k := range byDB {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		db := ds.Databases[k]
		tables, cols := "-", "-"
		if db != nil && db.MetaDir != "" {
			if s, _, err := dataset.LoadSchema(db); err == nil {
				t, c := s.Count()
				tables, cols = fmt.Sprint(t), fmt.Sprint(c)
			}
		}
		file := "-"
		if db != nil && db.SQLitePath != "" {
			file = db.SQLitePath
		} else if db != nil && db.Dialect == warehouse.SQLite {
			file = "MISSING"
		}
		fmt.Fprintf(tw, "%s\t%d\t%s\t%s\t%s\n", k, byDB[k], tables, cols, file)
	}
	tw.Flush()
	fmt.Fprintln(w)
	if len(ds.Problems) == 0 {
		fmt.Fprintln(w, "Problems: none")
		return
	}
	fmt.Fprintf(w, "Problems: %d\n", len(ds.Problems))
	for _, p := range ds.Problems {
		fmt.Fprintln(w, "  "+strings.ReplaceAll(p.String(), "\n", " "))
	}
}
