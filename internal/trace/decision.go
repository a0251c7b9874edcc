package trace

import (
	"fmt"
	"sort"

	"github.com/quorumsql/quorum/pkg/runtime/agent"
)

// DecisionOf is the record of an agent's decision on round over cands.
func DecisionOf(round int, d *agent.Decision, cands []*agent.Candidate) *Decision {
	td := &Decision{Round: round, Confidence: d.Confidence, Method: d.Method, Valid: d.Valid, Agreed: d.Agreed, Rule: d.Rule}
	td.Candidates, td.Clusters = clusters(cands)
	if d.Winner != nil {
		td.Winner = candName(d.Winner)
	}
	if d.Sampling != nil {
		td.StoppedAfter, td.Posterior = d.Sampling.StoppedAfter, d.Sampling.Posterior
	}
	if d.Next != nil {
		n := d.Next.Round
		td.NextRound = &n
		for _, t := range d.Next.Tasks {
			td.NextTasks = append(td.NextTasks, t.ID)
		}
	}
	for _, m := range d.Members {
		tm := Member{Agent: m.Agent, Confidence: m.Confidence, Method: m.Method, Valid: m.Valid, Agrees: m.Agrees}
		if m.Winner != nil {
			tm.Winner = candName(m.Winner)
		}
		if m.Sampling != nil {
			tm.StoppedAfter, tm.Posterior = m.Sampling.StoppedAfter, m.Sampling.Posterior
		}
		td.Members = append(td.Members, tm)
	}
	return td
}

// FinalOf is the record of a final answer decided by d (local runs; the
// cluster's voter records its message.FinalAnswer).
func FinalOf(d *agent.Decision, rounds, cands int) *Final {
	f := &Final{Status: "no_answer", Confidence: d.Confidence, Method: d.Method, Rounds: rounds, Candidates: cands, Valid: d.Valid}
	if d.Winner != nil {
		f.Status, f.SQL = "answered", d.Winner.SQL
	}
	return f
}

func candName(c *agent.Candidate) string { return fmt.Sprintf("%d.%d", c.Round, c.Index) }

// clusters groups the usable candidates by equal result tables, largest
// group first; the unusable ones are cluster -1.
func clusters(cands []*agent.Candidate) ([]Candidate, [][]string) {
	out := make([]Candidate, len(cands))
	byCSV := map[string]int{}
	var groups [][]string
	for i, c := range cands {
		out[i] = Candidate{Round: c.Round, Index: c.Index, Status: c.Status, Rows: c.Rows, SQL: c.SQL, Cluster: -1}
		if c.Status != agent.StatusOK {
			continue
		}
		g, ok := byCSV[c.CSV]
		if !ok {
			g = len(groups)
			byCSV[c.CSV] = g
			groups = append(groups, nil)
		}
		groups[g] = append(groups[g], candName(c))
		out[i].Cluster = g
	}
	order := make([]int, len(groups))
	for i := range order {
		order[i] = i
	}
	sort.SliceStable(order, func(a, b int) bool { return len(groups[order[a]]) > len(groups[order[b]]) })
	rank := make([]int, len(groups))
	sorted := make([][]string, len(groups))
	for r, g := range order {
		rank[g], sorted[r] = r, groups[g]
	}
	for i := range out {
		if out[i].Cluster >= 0 {
			out[i].Cluster = rank[out[i].Cluster]
		}
	}
	return out, sorted
}
