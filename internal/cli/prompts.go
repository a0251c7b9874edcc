package cli

import (
	"context"
	"encoding/json"
	"fmt"
	"github.com/quorumsql/quorum/pkg/warehouse/localdb"
	"io"
	"sort"
	"text/tabwriter"

	"github.com/quorumsql/quorum/pkg/agents/dbinfo"
	"github.com/quorumsql/quorum/pkg/agents/reforce"
	"github.com/quorumsql/quorum/pkg/dataset"
	"github.com/quorumsql/quorum/pkg/llm"
	"github.com/quorumsql/quorum/pkg/warehouse/sqlite"
)

// promptSize is one line of `quorum inspect --prompts --json`.
type promptSize struct {
	InstanceID  string `json:"instance_id"`
	Dialect     string `json:"dialect"`
	CharsBefore int    `json:"chars_before"`
	CharsAfter  int    `json:"chars_after"`
	TokensAfter int    `json:"tokens_after"`
}

// promptSizes measures every example's prompt before compression (no
// grouping, no oversize rules) and after (grouping and oversize rules; schema
// linking needs an LLM and is not applied).
func promptSizes(ctx context.Context, ds *dataset.Dataset, model string) ([]promptSize, []string) {
	set := &sqlite.Set{}
	defer set.Close()
	open := &localdb.Warehouses{DS: ds, SQLite: set}
	tok := llm.NewTokenizer()
	type pair struct{ before, after *dbinfo.Info }
	infos := map[string]*pair{}
	var out []promptSize
	var problems []string
	for _, e := range ds.Examples {
		db, ok := ds.Database(e)
		if !ok {
			continue
		}
		p, ok := infos[db.Key()]
		if !ok {
			p = &pair{}
			var err error
			if p.before, err = dbinfo.ForExample(ctx, ds, e, open, dbinfo.Uncompressed()); err == nil {
				p.after, err = dbinfo.ForExample(ctx, ds, e, open, dbinfo.DefaultOptions())
			}
			if err != nil {
				problems = append(problems, fmt.Sprintf("%s: %v", e.ID, err))
				p = nil
			}
			infos[db.Key()] = p
		}
		if p == nil {
			continue
		}
		after := p.after.Prompt(e.ExternalKnowledge)
		out = append(out, promptSize{InstanceID: e.ID, Dialect: string(e.Dialect),
			CharsBefore: dbinfo.Chars(p.before.Prompt(e.ExternalKnowledge)), CharsAfter: dbinfo.Chars(after),
			TokensAfter: tok.Count(model, after)})
	}
	return out, problems
}

func printPromptSizes(w io.Writer, sizes []promptSize, problems []string, asJSON bool) error {
	if asJSON {
		enc := json.NewEncoder(w)
		for _, s := range sizes {
			if err := enc.Encode(s); err != nil {
				return err
			}
		}
		return nil
	}
	byDialect := map[string][]promptSize{}
	for _, s := range sizes {
		byDialect[s.Dialect] = append(byDialect[s.Dialect], s)
		byDialect["all"] = append(byDialect["all"], s)
	}
	tw := tabwriter.NewWriter(w, 2, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "DIALECT\tEXAMPLES\tMEASURE\tMIN\tMEDIAN\tP95\tMAX")
	keys := make([]string, 0, len(byDialect))
	for k := range byDialect {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		ss := byDialect[k]
		for _, m := range []struct {
			name string
			get  func(promptSize) int
		}{
			{"chars before", func(s promptSize) int { return s.CharsBefore }},
			{"chars after", func(s promptSize) int { return s.CharsAfter }},
			{"tokens after", func(s promptSize) int { return s.TokensAfter }},
		} {
			v := make([]int, len(ss))
			for i, s := range ss {
				v[i] = m.get(s)
			}
			sort.Ints(v)
			fmt.Fprintf(tw, "%s\t%d\t%s\t%d\t%d\t%d\t%d\n", k, len(v), m.name, v[0], v[len(v)/2], v[min(len(v)-1, len(v)*95/100)], v[len(v)-1])
		}
	}
	tw.Flush()
	for _, p := range problems {
		fmt.Fprintln(w, "could not build a prompt:", p)
	}
	return nil
}

// showPrompts prints the first generation prompt of each example: its
// compressed table information (from the Spider 2.0 metadata when the
// dataset has it), the task and the dialect's instructions and tips.
func showPrompts(ctx context.Context, w io.Writer, ds *dataset.Dataset, ids []string) error {
	examples, err := ds.Select(dataset.Filter{IDs: ids})
	if err != nil {
		return err
	}
	set := &sqlite.Set{}
	defer set.Close()
	open := &localdb.Warehouses{DS: ds, SQLite: set}
	for _, e := range examples {
		info, err := dbinfo.ForExample(ctx, ds, e, open, dbinfo.DefaultOptions())
		if err != nil {
			return err
		}
		p := reforce.GeneratePrompt(reforce.CandidateInput{Example: reforce.Example{ID: e.ID, Question: e.Question, Dialect: e.Dialect,
			ExternalKnowledge: e.ExternalKnowledge}, TableInfo: info.Prompt(e.ExternalKnowledge), TableStruct: info.TableStruct()})
		fmt.Fprintf(w, "===== %s (%s, database %s): %d characters =====\n%s\n", e.ID, e.Dialect, e.DB, dbinfo.Chars(p), p)
	}
	return nil
}
