package cli

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"

	"github.com/spf13/cobra"

	"github.com/quorumsql/quorum/pkg/agents/reforce"
	"github.com/quorumsql/quorum/pkg/agents/sampling"
	"github.com/quorumsql/quorum/pkg/eval"
	"github.com/quorumsql/quorum/pkg/outputs"
	"github.com/quorumsql/quorum/pkg/runtime/agent"
)

// samplingExample is one example of the replay.
type samplingExample struct {
	ID string `json:"instance_id"`
	// Drawn is how many of the first round's candidates adaptive sampling
	// would have drawn; StoppedAfter the same when it stopped early.
	Drawn        int     `json:"drawn"`
	StoppedAfter int     `json:"stopped_after,omitempty"`
	Posterior    float64 `json:"posterior_confidence"`
	// CallsSaved estimates the LLM calls not made: the undrawn
	// candidates' at the run's mean calls per generated candidate, and,
	// for an example the fixed run explored, its exploration's.
	CallsSaved int `json:"calls_saved"`
	// Changed: stopped early on an answer that does not agree with the
	// run's own.
	Changed bool `json:"answer_changed"`
}

type samplingReplay struct {
	Run        string            `json:"run"`
	Policy     sampling.Config   `json:"policy"`
	Examples   []samplingExample `json:"examples"`
	Replayed   int               `json:"replayed"`
	Stopped    int               `json:"stopped_early"`
	Changed    int               `json:"answers_changed"`
	Calls      int               `json:"llm_calls"`
	CallsSaved int               `json:"llm_calls_saved"`
}

// newAnalyzeCmd is quorum analyze WHAT: its one analysis so far is
// sampling (the flags are the command's, so WHAT is an argument).
func newAnalyzeCmd() *cobra.Command {
	var runDir string
	var asJSON bool
	opts := map[string]*string{}
	cmd := &cobra.Command{
		Use:   "analyze sampling --run DIR",
		Short: "Analyze a finished run offline: sampling replays a fixed ReFoRCE run through adaptive sampling's stopping rule",
		Long: `analyze sampling replays the first-round candidates a ReFoRCE run with fixed
sampling recorded (its output's candidates/<instance_id>/r0_c<index>.*), in the
order they were drawn (by index), through adaptive sampling's waves and
stopping rule, as the agent's decision step applies them live. It needs no
simulator: for each example it reports how many candidates adaptive sampling
would have drawn, the rule's posterior confidence, whether it stopped early on
an answer other than the run's, and the LLM calls that would have been saved
(estimated from the example's own costs per stage).`,
		Args: usageArgs(cobra.ExactArgs(1)),
		RunE: func(cmd *cobra.Command, args []string) error {
			if args[0] != "sampling" {
				return usage(fmt.Errorf("quorum analyze %s: the analyses are: sampling", args[0]))
			}
			if runDir == "" {
				return usage(errors.New("--run is required: a run's output folder"))
			}
			set := map[string]string{sampling.OptSampling: sampling.Adaptive}
			for k, v := range opts {
				set[k] = *v
			}
			pol, err := sampling.FromOptions(set)
			if err != nil {
				return usage(err)
			}
			rep, err := replaySampling(runDir, pol)
			if err != nil {
				return err
			}
			w := cmd.OutOrStdout()
			if asJSON {
				return json.NewEncoder(w).Encode(rep)
			}
			fmt.Fprintf(w, "%-24s %6s %8s %10s %12s %8s\n", "example", "drawn", "stopped", "posterior", "calls saved", "changed")
			for _, e := range rep.Examples {
				fmt.Fprintf(w, "%-24s %6d %8v %10.3f %12d %8v\n", e.ID, e.Drawn, e.StoppedAfter > 0, e.Posterior, e.CallsSaved, e.Changed)
			}
			pct := 0.0
			if rep.Calls > 0 {
				pct = 100 * float64(rep.CallsSaved) / float64(rep.Calls)
			}
			fmt.Fprintf(w, "%d examples replayed (%s rule, threshold %g): %d stopped early, %d answers changed; about %d of %d LLM calls saved (%.1f%%)\n",
				rep.Replayed, pol.Rule, pol.Threshold, rep.Stopped, rep.Changed, rep.CallsSaved, rep.Calls, pct)
			return nil
		},
	}
	f := cmd.Flags()
	f.StringVar(&runDir, "run", "", "the output folder of a ReFoRCE run with fixed sampling")
	f.BoolVar(&asJSON, "json", false, "print the replay as one JSON object")
	for _, o := range sampling.Options("candidate") {
		if o.Name == sampling.OptSampling {
			continue
		}
		v := o.Default
		opts[o.Name] = &v
		f.StringVar(&v, o.Name, o.Default, o.Usage)
	}
	return cmd
}

// replaySampling replays the run in dir through pol.
func replaySampling(dir string, pol sampling.Config) (*samplingReplay, error) {
	r, err := outputs.ReadReport(dir)
	if err != nil {
		return nil, err
	}
	if name := reforce.Definition().Name; r.Agent != "" && r.Agent != name {
		return nil, fmt.Errorf("run %s: agent %s; the replay reads the first round of a %s run", dir, r.Agent, name)
	}
	if p := r.AgentOptions[sampling.OptSampling]; p != "" && p != sampling.Fixed {
		return nil, fmt.Errorf("run %s sampled %s: the replay needs a run that drew every candidate (fixed)", dir, p)
	}
	votes := r.Votes
	if v, err := strconv.Atoi(r.AgentOptions[agent.OptVotes]); err == nil && v > 0 {
		votes = v
	}
	if votes <= 0 {
		return nil, fmt.Errorf("run %s: run.json names no candidate count", dir)
	}
	out := &samplingReplay{Run: dir, Policy: pol}
	for _, e := range r.Examples {
		out.Calls += e.Cost.LLMCalls
		if e.Status == "failed" {
			continue
		}
		cands := make([]*agent.Candidate, votes)
		for i := range cands {
			cands[i] = &agent.Candidate{Index: i, Status: agent.StatusError}
			b, err := os.ReadFile(filepath.Join(dir, outputs.CandidatesDir, e.InstanceID, outputs.CandidateName(0, i)+".csv"))
			if err == nil {
				cands[i].Status, cands[i].CSV = agent.StatusOK, string(b)
			} else if !errors.Is(err, os.ErrNotExist) {
				return nil, err
			}
		}
		rp := pol.Replay(cands)
		ex := samplingExample{ID: e.InstanceID, Drawn: rp.Drawn, Posterior: rp.Posterior}
		out.Replayed++
		if rp.Stopped {
			ex.StoppedAfter = rp.Drawn
			out.Stopped++
			ex.CallsSaved = savedCalls(e, votes, rp.Drawn)
			ex.Changed = !agrees(filepath.Join(dir, e.InstanceID+".csv"), rp.Vote.Winner.CSV)
			if ex.Changed {
				out.Changed++
			}
		}
		out.CallsSaved += ex.CallsSaved
		out.Examples = append(out.Examples, ex)
	}
	return out, nil
}

// savedCalls estimates the calls an early stop after drawn of votes
// candidates saves: the rest at the mean calls of a generated candidate,
// and every later stage's (exploration, regeneration, the model vote).
func savedCalls(e outputs.Example, votes, drawn int) int {
	calls := func(stage string) int {
		if c := e.CostByStage[stage]; c != nil {
			return c.LLMCalls
		}
		return 0
	}
	return calls("generate")*(votes-drawn)/votes + calls("explore") + calls("regenerate") + calls("vote")
}

// agrees reports whether the answer file at path agrees with csv.
func agrees(path, csv string) bool {
	b, err := os.ReadFile(path)
	if err != nil {
		return false
	}
	a, err1 := eval.ReadCSV(b)
	w, err2 := eval.ReadCSV([]byte(csv))
	return err1 == nil && err2 == nil && eval.Agree(a, w)
}
