package serve

import (
	"errors"
	"fmt"
	"net/http"

	"github.com/quorumsql/quorum/internal/runtime/runstate"
)

// questionTrace answers GET /v1/questions/{id}/trace: what the agent did
// for the question (pkg/trace's Export, texts in place), as far as it
// has got.
func (s *Server) questionTrace(w http.ResponseWriter, r *http.Request) {
	q, ok := s.owned(w, r)
	if !ok {
		return
	}
	env := s.cfg.Env
	m, err := env.State.Manifest(r.Context(), q.ID)
	if errors.Is(err, runstate.ErrNoRun) || err == nil && len(m.Examples) == 0 {
		// Answered from the cache or refused before it ran.
		writeJSON(w, http.StatusNotFound, apiError{Error: fmt.Sprintf("question %s has no trace: it did not run (answered from the cache, or refused)", q.ID)})
		return
	}
	if err != nil {
		writeJSON(w, http.StatusServiceUnavailable, apiError{Error: err.Error()})
		return
	}
	if env.Traces == nil || m.Trace == "" || m.Trace == "none" {
		writeJSON(w, http.StatusNotFound, apiError{Error: fmt.Sprintf("question %s has no trace: serve keeps none (--trace none)", q.ID)})
		return
	}
	x, err := env.Traces.Export(r.Context(), q.ID, m.Examples[0])
	if err != nil {
		writeJSON(w, http.StatusServiceUnavailable, apiError{Error: err.Error()})
		return
	}
	x.Agent, x.Level = m.Agent, m.Trace
	x.Resolve()
	writeJSON(w, http.StatusOK, x)
}
