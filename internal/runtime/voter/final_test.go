package voter

import (
	"fmt"
	"testing"

	"github.com/quorumsql/quorum/internal/blob"
	"github.com/quorumsql/quorum/internal/runtime/message"
	"github.com/quorumsql/quorum/internal/runtime/runstate"
	"github.com/quorumsql/quorum/pkg/runtime/agent"
)

// TestFinalKeepsEveryCandidatesSQL: the final answer carries the SQL of
// every candidate that wrote one, whatever its status, with the result
// blob of those that produced rows; an agent's own record (ReFoRCE's vote)
// and a candidate without SQL are left out.
func TestFinalKeepsEveryCandidatesSQL(t *testing.T) {
	t.Parallel()
	ref := blob.Ref([]byte("a\n1\n"))
	results := []*message.CandidateResult{
		{Round: 0, Index: 0, SQL: "SELECT 1", Status: agent.StatusOK, CSVRef: ref},
		{Round: 0, Index: 1, SQL: "SELECT 2 WHERE 0", Status: agent.StatusEmpty},
		{Round: 0, Index: 2, SQL: "SELEC 3", Status: agent.StatusError, Error: "syntax error"},
		{Round: 0, Index: 3, SQL: "", Status: agent.StatusGaveUp, Error: "no SQL"},
		{Round: 1, Index: 4, SQL: "SELECT 1", Status: "vote"},
	}
	cands := make([]*agent.Candidate, len(results))
	for i, r := range results {
		cands[i] = &agent.Candidate{Round: r.Round, Index: r.Index, SQL: r.SQL, Status: r.Status}
	}
	f := final(&runstate.Manifest{Run: "r"}, runstate.Round{Run: "r", Example: "dev_0", Round: 1},
		&agent.Decision{Winner: cands[0], Valid: 1}, cands, results)
	want := []message.CandidateSQL{
		{Round: 0, Index: 0, Status: agent.StatusOK, SQL: "SELECT 1", CSVRef: ref},
		{Round: 0, Index: 1, Status: agent.StatusEmpty, SQL: "SELECT 2 WHERE 0"},
		{Round: 0, Index: 2, Status: agent.StatusError, SQL: "SELEC 3"},
	}
	if fmt.Sprint(f.CandidateSQL) != fmt.Sprint(want) {
		t.Errorf("candidate SQL %+v, want %+v", f.CandidateSQL, want)
	}
	if len(f.CandidateRefs) != 1 || f.CandidateRefs[0] != ref || f.Status != "answered" || f.CSVRef != ref {
		t.Errorf("candidate refs %v, status %s, csv ref %s; want the one valid candidate's, answered", f.CandidateRefs, f.Status, f.CSVRef)
	}
	if err := f.Validate(); err != nil {
		t.Errorf("the final answer does not validate: %v", err)
	}
}
