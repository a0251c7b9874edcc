package llmsim

import (
	"slices"
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

// NoAnswerColumn names the one column of NoAnswerSQL's result.
const NoAnswerColumn = "llmsim_no_answer"

// NoAnswerSQL is what the simulator answers a request it does not
// recognise (a question without gold): a query whose result says so,
// valid in every dialect. An application that knows its LLM is the
// simulator (its /models says so) reads this answer as "no answer"
// rather than pass a made-up constant off as one; see IsNoAnswer.
const NoAnswerSQL = "SELECT 'the simulator has no answer for this question' AS " + NoAnswerColumn

// IsNoAnswer reports whether sql is the simulator's no-answer query (as
// an agent may have rewritten it: case, spacing, comments, a trailing
// semicolon). It says nothing about who wrote sql: only an application
// whose LLM is the simulator may ask it.
func IsNoAnswer(sql string) bool {
	sig := func(s string) []string {
		var out []string
		for _, t := range sqltext.Tokens(s, sqltext.Options{}) {
			if t.Text != ";" {
				out = append(out, t.Text)
			}
		}
		return out
	}
	return slices.Equal(sig(sql), sig(NoAnswerSQL))
}
