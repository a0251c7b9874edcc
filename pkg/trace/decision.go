package trace

import (
	"fmt"
	"sort"

	"github.com/quorumsql/quorum/pkg/runtime/agent"
)

// DecisionOf is the record of an agent's decision on round over cands.
func DecisionOf(round int, d *agent.Decision, cands []*agent.Candidate) *Decision {
	td := &Decision{Round: round, Confidence: d.Confidence, Method: d.Method, Valid: d.Valid, Agreed: d.Agreed, Rule: d.Rule}
	td.Candidates, td.Clusters, td.Uncounted = clusters(cands, d.Voted, d.Agreed)
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

// clusters groups the candidates the vote counted: first those the agent
// found agreeing with the winner (its own Agreed, so the page's counts are
// run.json's), then the rest by equal result tables, largest first. A
// usable candidate the vote did not count (voted names them; nil: all
// counted) is in uncounted; it and an unusable one are cluster -1.
// Indices name candidates; where rounds reuse one, the latest round's is
// meant (the vote after exploring counts that round).
func clusters(cands []*agent.Candidate, voted, agreed []int) (out []Candidate, groups [][]string, uncounted []string) {
	latest := map[int]int{} // index -> position of its latest round's candidate
	for i, c := range cands {
		if j, ok := latest[c.Index]; !ok || cands[j].Round <= c.Round {
			latest[c.Index] = i
		}
	}
	in := func(idx []int) map[int]bool {
		m := map[int]bool{}
		for _, x := range idx {
			if i, ok := latest[x]; ok {
				m[i] = true
			}
		}
		return m
	}
	counted, agrees := in(voted), in(agreed)
	out = make([]Candidate, len(cands))
	byCSV := map[string]int{}
	if len(agrees) > 0 {
		groups = append(groups, nil) // the winner's, first
	}
	for i, c := range cands {
		out[i] = Candidate{Round: c.Round, Index: c.Index, Status: c.Status, Rows: c.Rows, SQL: c.SQL, Cluster: -1}
		switch {
		case agrees[i]:
			out[i].Cluster = 0
			groups[0] = append(groups[0], candName(c))
			continue
		case c.Status != agent.StatusOK:
			continue
		case voted != nil && !counted[i]:
			uncounted = append(uncounted, candName(c))
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
	first := 0
	if len(agrees) > 0 {
		first = 1
	}
	order := make([]int, len(groups))
	for i := range order {
		order[i] = i
	}
	sort.SliceStable(order[first:], func(a, b int) bool { return len(groups[order[first+a]]) > len(groups[order[first+b]]) })
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
	return out, sorted, uncounted
}

// AgreeCount is how many candidates agree with the winner: the agent's own
// count (run.json's agreed_candidates), else, for a record without it, the
// winner's group.
func (d *Decision) AgreeCount() int {
	if len(d.Agreed) > 0 {
		return len(d.Agreed)
	}
	for _, g := range d.Clusters {
		for _, c := range g {
			if c == d.Winner {
				return len(g)
			}
		}
	}
	return 0
}
