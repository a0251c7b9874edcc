package cli

import (
	"context"
	"encoding/json"
	"fmt"
	"github.com/quorumsql/quorum/pkg/warehouse/localdb"
	"io"
	"sort"
	"strings"
	"text/tabwriter"

	"github.com/spf13/cobra"

	"github.com/quorumsql/quorum/pkg/agents/dbinfo"
	"github.com/quorumsql/quorum/pkg/dataset"
	"github.com/quorumsql/quorum/pkg/warehouse"
	"github.com/quorumsql/quorum/pkg/warehouse/sqlite"
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
	return f.loadOpt(dir, dataset.Options{})
}

// loadOpt loads with opt's other settings (e.g. the catalogue).
func (f *datasetFlags) loadOpt(dir string, opt dataset.Options) (*dataset.Dataset, error) {
	opt.TaskFile, opt.SQLiteDir = f.tasks, f.sqliteDir
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
malformed task lines, unknown databases, missing documents or sqlite files,
files that are links leading out of the dataset or over their size limits.
It lists all problems rather than stopping at the first.

With --prompts it reports the size of each example's ReFoRCE prompt before
compression and after table grouping and the oversize rules (schema linking,
which needs an LLM, is not applied), and their distribution per dialect.
It also measures both modes of ReFoRCE's option compression: for each, the
prompt's size after compression and the table-level linking calls it would
need (one per table block of a prompt of link-budget bytes or more, 200,000
by default); with --json, per example
(chars_after and link_calls_paper for the paper's rule,
chars_after_structural and link_calls_structural for the structural mode).`,
		Args: usageArgs(cobra.ExactArgs(1)),
		RunE: func(cmd *cobra.Command, args []string) error {
			ds, err := df.load(args[0])
			if err != nil {
				return usage(err)
			}
			if len(show) > 0 {
				return showPrompts(cmd.Context(), cmd.OutOrStdout(), ds, show)
			}
			if prompts {
				sizes, problems := promptSizes(cmd.Context(), ds, model)
				modes := promptModes(cmd.Context(), ds, sizes)
				if asJSON {
					return printPromptModes(cmd.OutOrStdout(), modes)
				}
				if err := printPromptSizes(cmd.OutOrStdout(), sizes, problems, false); err != nil {
					return err
				}
				summarizePromptModes(cmd.OutOrStdout(), modes)
				return nil
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

// promptMode is one line of `quorum inspect --prompts --json`: the sizes
// of promptSizes (chars_after is the paper's compression) and, for each
// compression mode (ReFoRCE's option), the linking calls the prompt needs before the model
// sees it (one per table block when it is of DefaultLinkBudget bytes or
// more).
type promptMode struct {
	promptSize
	LinkCallsPaper       int `json:"link_calls_paper"`
	CharsAfterStructural int `json:"chars_after_structural"`
	LinkCallsStructural  int `json:"link_calls_structural"`
}

func promptModes(ctx context.Context, ds *dataset.Dataset, sizes []promptSize) []promptMode {
	set := &sqlite.Set{}
	defer set.Close()
	open := &localdb.Warehouses{DS: ds, SQLite: set}
	type pair struct{ paper, structural *dbinfo.Info }
	infos := map[string]*pair{}
	byID := map[string]*dataset.Example{}
	for _, e := range ds.Examples {
		byID[e.ID] = e
	}
	linker := &dbinfo.Linker{Budget: dbinfo.DefaultLinkBudget}
	calls := func(info *dbinfo.Info, ek string) int {
		if linker.NeedsLinking(info, ek) {
			return len(info.Blocks)
		}
		return 0
	}
	out := make([]promptMode, 0, len(sizes))
	for _, s := range sizes {
		m := promptMode{promptSize: s}
		e := byID[s.InstanceID]
		db, _ := ds.Database(e)
		p, ok := infos[db.Key()]
		if !ok {
			p = &pair{}
			var err error
			if p.paper, err = dbinfo.ForExample(ctx, ds, e, open, dbinfo.DefaultOptions()); err == nil {
				p.structural, err = dbinfo.ForExample(ctx, ds, e, open, dbinfo.StructuralOptions())
			}
			if err != nil {
				p = nil
			}
			infos[db.Key()] = p
		}
		if p != nil {
			m.LinkCallsPaper = calls(p.paper, e.ExternalKnowledge)
			m.CharsAfterStructural = dbinfo.Chars(p.structural.Prompt(e.ExternalKnowledge))
			m.LinkCallsStructural = calls(p.structural, e.ExternalKnowledge)
		}
		out = append(out, m)
	}
	return out
}

func printPromptModes(w io.Writer, modes []promptMode) error {
	enc := json.NewEncoder(w)
	for _, m := range modes {
		if err := enc.Encode(m); err != nil {
			return err
		}
	}
	return nil
}

// summarizePromptModes prints, per compression mode, how many prompts are
// over 200,000 characters and the linking calls they need.
func summarizePromptModes(w io.Writer, modes []promptMode) {
	type tally struct{ over, examples, calls int }
	var paper, structural tally
	for _, m := range modes {
		if m.CharsAfter > dbinfo.DefaultLinkBudget {
			paper.over++
		}
		if m.LinkCallsPaper > 0 {
			paper.examples++
			paper.calls += m.LinkCallsPaper
		}
		if m.CharsAfterStructural > dbinfo.DefaultLinkBudget {
			structural.over++
		}
		if m.LinkCallsStructural > 0 {
			structural.examples++
			structural.calls += m.LinkCallsStructural
		}
	}
	fmt.Fprintf(w, "compression paper: %d prompts over %d chars; %d need linking (%d calls)\n", paper.over, dbinfo.DefaultLinkBudget, paper.examples, paper.calls)
	fmt.Fprintf(w, "compression structural: %d prompts over %d chars; %d need linking (%d calls)\n", structural.over, dbinfo.DefaultLinkBudget, structural.examples, structural.calls)
}
