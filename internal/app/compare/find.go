package compare

import (
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"
)

// Listed is one run found under a folder: what `quorum runs list DIR`
// shows of it.
type Listed struct {
	Dir      string    `json:"dir"`
	RunID    string    `json:"run_id"`
	Agent    string    `json:"agent,omitempty"`
	Dataset  string    `json:"dataset"`
	Seed     uint64    `json:"seed"`
	Votes    int       `json:"votes"`
	LLM      string    `json:"llm,omitempty"`
	Examples int       `json:"examples"`
	Answered int       `json:"answered"`
	Failed   int       `json:"failed"`
	EX       *float64  `json:"ex,omitempty"`
	LLMCalls int       `json:"llm_calls"`
	Money    float64   `json:"money"`
	Started  time.Time `json:"started"`
	Finished time.Time `json:"finished"`
	Sessions int       `json:"sessions,omitempty"`
}

// maxDepth bounds how deep Find looks under a folder: a run's folder is
// named by --out, usually a child or grandchild of where runs are kept.
const maxDepth = 4

// Find lists the runs (folders holding a run.json) under each of roots,
// oldest first; hidden folders (a run's .state, its Redis) are not
// entered. A root that does not exist is an error naming it.
func Find(roots []string) ([]Listed, error) {
	var out []Listed
	for _, root := range roots {
		if st, err := os.Stat(root); err != nil || !st.IsDir() {
			return nil, fmt.Errorf("%s: no such folder: name folders that hold run folders (a run's --out)", root)
		}
		err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
			if err != nil {
				return err
			}
			if !d.IsDir() {
				return nil
			}
			rel, _ := filepath.Rel(root, path)
			if path != root && strings.HasPrefix(d.Name(), ".") || strings.Count(rel, string(filepath.Separator)) >= maxDepth {
				return filepath.SkipDir
			}
			if _, err := os.Stat(filepath.Join(path, "run.json")); err != nil {
				return nil
			}
			r, err := Load(path)
			if err != nil {
				return err
			}
			out = append(out, listed(r))
			return nil
		})
		if err != nil {
			return nil, fmt.Errorf("looking for runs under %s: %w", root, err)
		}
	}
	slices.SortStableFunc(out, func(a, b Listed) int { return a.Started.Compare(b.Started) })
	return out, nil
}

func listed(r *Run) Listed {
	rep := r.Report
	return Listed{Dir: r.Dir, RunID: rep.RunID, Agent: rep.Agent, Dataset: rep.Dataset, Seed: rep.Seed, Votes: rep.Votes, LLM: rep.LLM,
		Examples: len(rep.Examples), Answered: rep.Totals.Answered, Failed: rep.Totals.Failed, EX: rep.Totals.EX,
		LLMCalls: rep.Totals.Cost.LLMCalls, Money: rep.Totals.Cost.LLM.Money, Started: rep.Started, Finished: rep.Finished,
		Sessions: len(rep.Sessions)}
}
