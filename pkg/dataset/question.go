package dataset

import (
	"fmt"
	"strings"

	"github.com/quorumsql/quorum/pkg/sqltext"
)

// Question is an example asked online (quorum serve) rather than read from
// a task file: it runs on one of the dataset's databases.
type Question struct {
	ID                string          `json:"id"`
	DB                string          `json:"db"`
	Dialect           sqltext.Dialect `json:"dialect"`
	Question          string          `json:"question"`
	ExternalKnowledge string          `json:"external_knowledge,omitempty"`
}

// Check validates a question against ds: a safe id, a database ds has, a
// question within its limits. Errors name the field.
func (q *Question) Check(ds *Dataset) error {
	if err := CheckName(q.ID); err != nil {
		return fmt.Errorf("id %q: %w", q.ID, err)
	}
	if _, ok := ds.Databases[string(q.Dialect)+"/"+q.DB]; !ok {
		return fmt.Errorf("db: %q is not a %s database of dataset %s", q.DB, q.Dialect, ds.Root)
	}
	switch {
	case strings.TrimSpace(q.Question) == "":
		return fmt.Errorf("question: empty")
	case len(q.Question) > MaxQuestionBytes:
		return fmt.Errorf("question: %d bytes, over the %d-byte limit", len(q.Question), MaxQuestionBytes)
	case len(q.ExternalKnowledge) > MaxKnowledgeBytes:
		return fmt.Errorf("external_knowledge: %d bytes, over the %d-byte limit", len(q.ExternalKnowledge), MaxKnowledgeBytes)
	}
	return nil
}

// WithQuestions returns a copy of ds whose examples are qs (its databases,
// metadata and gold stay shared): what a run of online questions works on.
func (ds *Dataset) WithQuestions(qs ...Question) (*Dataset, error) {
	out := *ds
	out.Examples, out.Problems, out.blocked, out.index = nil, nil, nil, nil
	for _, q := range qs {
		if err := q.Check(ds); err != nil {
			return nil, fmt.Errorf("question %s: %w", q.ID, err)
		}
		out.Examples = append(out.Examples, &Example{ID: q.ID, DB: q.DB, Dialect: q.Dialect, Question: q.Question,
			ExternalKnowledge: q.ExternalKnowledge, Source: "question " + q.ID})
	}
	return &out, nil
}
