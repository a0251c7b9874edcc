package serve

import (
	"strings"

	"go.uber.org/zap"

	"github.com/quorumsql/quorum/pkg/dataset"
	"github.com/quorumsql/quorum/pkg/eval"
)

// GoldCheck is an answer checked against the dataset's gold answer: set
// when the question is exactly one of the dataset's examples that has a
// gold result (the demo's questions, a benchmark's), by the evaluator
// quorum run scores with (pkg/eval, the benchmark's rules). The gold answer
// never reaches the agent: it is read here, after the run, from the
// dataset's evaluation suite.
type GoldCheck struct {
	// Example is the dataset's example the question is.
	Example string `json:"example"`
	// Right says whether the answer's whole result matches a gold result.
	Right bool `json:"right"`
}

// goldCheck checks q's answer, its result CSV at result, against the gold
// answer of the dataset example q is exactly; nil when q is none (or the
// example has no gold result), and when a table cannot be read (logged):
// no check is better than a wrong one.
func (s *Server) goldCheck(q *Question, result string) *GoldCheck {
	e := s.goldExample(q)
	if e == nil {
		return nil
	}
	pred, err := eval.ReadCSVFile(result)
	if err != nil {
		s.cfg.Log.Warn("reading an answer to check it against gold", zap.String("question", q.ID), zap.Error(err))
		return nil
	}
	golds := make([]*eval.Frame, len(e.Gold.Results))
	for i, f := range e.Gold.Results {
		if golds[i], err = eval.ReadCSVFile(f); err != nil {
			s.cfg.Log.Warn("reading a gold result", zap.String("example", e.ID), zap.Error(err))
			return nil
		}
	}
	right, err := eval.CompareGold(pred, golds, e.Gold.Single, e.Gold.Spec.ConditionCols, e.Gold.Spec.IgnoreOrder)
	if err != nil {
		s.cfg.Log.Warn("checking an answer against gold", zap.String("question", q.ID), zap.String("example", e.ID), zap.Error(err))
		return nil
	}
	return &GoldCheck{Example: e.ID, Right: right}
}

// goldExample is the dataset example with a gold result that q asks
// exactly (datasetExample).
func (s *Server) goldExample(q *Question) *dataset.Example {
	if e := s.datasetExample(q); e != nil && len(e.Gold.Results) > 0 {
		return e
	}
	return nil
}

// datasetExample is the dataset example q asks exactly: the same
// database, question and external knowledge (the example's document, or
// none when it has none). A follow-up is never one: its conversation can
// change what its words ask.
func (s *Server) datasetExample(q *Question) *dataset.Example {
	if q.FollowUpOf != "" || len(q.Turns) > 0 {
		return nil
	}
	for _, e := range s.ds.Examples {
		if e.DB == q.DB && string(e.Dialect) == q.Dialect && strings.TrimSpace(e.Question) == q.Question &&
			strings.TrimSpace(e.ExternalKnowledge) == strings.TrimSpace(q.ExternalKnowledge) && s.ds.Runnable(e.ID) {
			return e
		}
	}
	return nil
}
