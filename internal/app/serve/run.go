package serve

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"time"

	"go.uber.org/zap"

	"github.com/quorumsql/quorum/pkg/dataset"
	"github.com/quorumsql/quorum/pkg/warehouse"
)

// Edit-and-rerun: POST /v1/questions/{id}/run runs SQL the user wrote on
// the question's database. It goes through the same read-only guard as
// every agent query (warehouse.Admit here, to answer 400 with its reason
// before a connection is taken; then the warehouse's own check and, for
// SQLite, its read-only authorizer), the warehouse's cluster-wide quota
// (the registry's gate), this process's cap on reruns at once, the
// tenant's requests per minute, a row cap and a timeout.

// runRequest is POST /v1/questions/{id}/run's body.
type runRequest struct {
	SQL string `json:"sql"`
}

// runResult is a rerun's answer: the rows as an answer has them.
type runResult struct {
	SQL        string     `json:"sql"`
	Columns    []string   `json:"columns"`
	Rows       [][]string `json:"rows"`
	RowCount   int        `json:"row_count"`
	Truncated  bool       `json:"truncated,omitempty"`
	Understood string     `json:"understood,omitempty"`
	Seconds    float64    `json:"seconds"`
}

// MaxRunSQLBytes bounds a rerun's SQL.
const MaxRunSQLBytes = 64 << 10

// runWait is how long a rerun waits for one of the process's slots before
// it is refused with 429.
const runWait = 10 * time.Second

// admitTenant takes a request from the tenant's quota; on refusal it has
// answered 429 (or 503). A request on no existing question (POST
// /v1/questions) asks one: its tokens are reserved (tenants.go); one on a
// question (a rerun) calls no LLM and reserves none. hold is the
// reservation (quota.admit).
func (s *Server) admitTenant(w http.ResponseWriter, r *http.Request) (hold string, ok bool) {
	if s.cfg.Tenants == nil {
		return "", true
	}
	tenant := tenantOf(r)
	hold, wait, err := s.quota.admit(r.Context(), tenant, s.cfg.Tenants.LimitsOf(tenant), r.PathValue("id") == "")
	var refused refusal
	if errors.As(err, &refused) {
		w.Header().Set("Retry-After", strconv.Itoa(int((refused.retryAfter()+time.Second-1)/time.Second)))
		writeJSON(w, http.StatusTooManyRequests, apiError{Error: refused.Error()})
		return "", false
	}
	if err != nil {
		writeJSON(w, http.StatusServiceUnavailable, apiError{Error: "checking the tenant's quota: " + err.Error()})
		return "", false
	}
	if wait > 0 {
		w.Header().Set("Retry-After", strconv.Itoa(int((wait+time.Second-1)/time.Second)))
		writeJSON(w, http.StatusTooManyRequests, apiError{Error: fmt.Sprintf("tenant %s is over its quota; retry in %s", tenant, wait.Round(time.Second))})
		return "", false
	}
	return hold, true
}

func (s *Server) runSQL(w http.ResponseWriter, r *http.Request) {
	q, ok := s.owned(w, r)
	if !ok {
		return
	}
	var req runRequest
	if !decodeBody(w, r, &req) {
		return
	}
	sql := strings.TrimSpace(req.SQL)
	switch {
	case sql == "":
		badField(w, "sql", "required: the SQL to run on the question's database")
		return
	case len(sql) > MaxRunSQLBytes:
		badField(w, "sql", "over %d bytes", MaxRunSQLBytes)
		return
	}
	db, n := s.database(q.DB, q.Dialect)
	if n != 1 {
		writeJSON(w, http.StatusNotFound, apiError{Error: fmt.Sprintf("question %s's database %q is no longer served", q.ID, q.DB)})
		return
	}
	if _, err := warehouse.Admit(db.db.Dialect, sql); err != nil {
		badField(w, "sql", "%s", err.Error())
		return
	}
	if _, ok := s.admitTenant(w, r); !ok {
		return
	}
	ctx := r.Context()
	release, ok := s.holdRunSlot(w, r) // runslots.go
	if !ok {
		return
	}
	defer release()
	start := time.Now()
	res, err := s.query(ctx, q, db, sql)
	var qe *warehouse.QueryError
	switch {
	case errors.As(err, &qe):
		badField(w, "sql", "%s", qe.Message)
		return
	case err != nil:
		writeJSON(w, http.StatusServiceUnavailable, apiError{Error: err.Error()})
		return
	}
	out := runResult{SQL: sql, Columns: []string{}, Rows: [][]string{}, RowCount: len(res.Rows), Truncated: res.Truncated,
		Understood: Understood(sql, db.db.Dialect), Seconds: time.Since(start).Seconds()}
	for _, c := range res.Columns {
		out.Columns = append(out.Columns, c.Name)
	}
	for _, row := range res.Rows {
		cells := make([]string, len(out.Columns))
		for i := range cells {
			if i < len(row) {
				cells[i] = row[i].CSV()
			}
		}
		out.Rows = append(out.Rows, cells)
	}
	s.cfg.Log.Info("edited SQL run", zap.String("question", q.ID), zap.String("tenant", q.Tenant), zap.Int("rows", out.RowCount))
	writeJSON(w, http.StatusOK, out)
}

// query runs sql on db within the run limits: MaxRows (one more is read
// to tell a capped result), a byte cap and the query timeout.
func (s *Server) query(ctx context.Context, q *Question, db *Database, sql string) (*warehouse.Result, error) {
	wh, err := s.open(ctx, &dataset.Example{ID: q.ID, DB: db.Name, Dialect: db.db.Dialect})
	if err != nil {
		return nil, err
	}
	ctx = warehouse.WithLabels(ctx, map[string]string{"quorum_question": q.ID, "quorum_purpose": "rerun"})
	return wh.Query(ctx, sql, warehouse.Limits{MaxRows: s.cfg.MaxRows, MaxBytes: runMaxBytes, Timeout: s.runTimeout()})
}

// runMaxBytes bounds the cells a rerun returns.
const runMaxBytes = 16 << 20

// runTimeout is a rerun's timeout: the questions' query timeout, else 30s.
func (s *Server) runTimeout() time.Duration {
	if s.cfg.QueryTimeout > 0 {
		return s.cfg.QueryTimeout
	}
	return 30 * time.Second
}
