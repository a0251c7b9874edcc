package llmsim

import (
	"strings"

	"github.com/quorumsql/quorum/pkg/dataset"
	"github.com/quorumsql/quorum/pkg/sqltext"
)

// Recogniser tells whether the simulator has an answer for a question
// before anything asks it: llmsim answers only its dataset's questions
// that have gold SQL, recognised as knowledge.find does (the text contains
// one of them); anything else gets a generic SELECT 1 that an application
// must not pass off as an answer.
type Recogniser struct {
	byDB map[string][]string
}

// NewRecogniser lists ds's questions with gold SQL by database.
func NewRecogniser(ds *dataset.Dataset) *Recogniser {
	r := &Recogniser{byDB: map[string][]string{}}
	for _, e := range ds.Examples {
		q := strings.TrimSpace(e.Question)
		if q == "" || len(sqltext.Inspect(e.Gold.SQL, e.Dialect.LexOptions())) == 0 {
			continue
		}
		r.byDB[e.DB] = append(r.byDB[e.DB], e.Question)
	}
	return r
}

// Knows reports whether the simulator has an answer for text asked about
// database db.
func (r *Recogniser) Knows(db, text string) bool {
	for _, q := range r.byDB[db] {
		if strings.Contains(text, q) {
			return true
		}
	}
	return false
}

// Questions are the questions of db it has answers for, in the dataset's
// order.
func (r *Recogniser) Questions(db string) []string {
	return append([]string(nil), r.byDB[db]...)
}
