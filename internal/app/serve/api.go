package serve

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"reflect"
	"sort"
	"strings"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/propagation"
	oteltrace "go.opentelemetry.io/otel/trace"
	"go.uber.org/zap"

	"github.com/quorumsql/quorum/pkg/dataset"
	"github.com/quorumsql/quorum/pkg/runtime/agent"
	"github.com/quorumsql/quorum/pkg/trace"
	"github.com/quorumsql/quorum/pkg/warehouse"
)

// MaxBodyBytes bounds a request body.
const MaxBodyBytes = 256 << 10

// MaxVotes bounds the candidates one question may ask for: its votes, and
// any option of the agent's counting candidates (agent.AskCount).
const MaxVotes = agent.MaxAskedCandidates

// apiError is every error response: what is wrong and, for bad input, the
// field.
type apiError struct {
	Error string `json:"error"`
	Field string `json:"field,omitempty"`
}

func writeJSON(w http.ResponseWriter, code int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(code)
	_ = json.NewEncoder(w).Encode(v)
}

func badField(w http.ResponseWriter, field, format string, args ...any) {
	writeJSON(w, http.StatusBadRequest, apiError{Error: field + ": " + fmt.Sprintf(format, args...), Field: field})
}

type tenantKey struct{}

// authed resolves the request's API key (Authorization: Bearer KEY, or
// X-API-Key) to its tenant; no key, no answer.
func (s *Server) authed(h http.HandlerFunc) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		tenant := "default"
		if s.cfg.Tenants != nil {
			key := r.Header.Get("X-API-Key")
			if auth := r.Header.Get("Authorization"); auth != "" {
				key = "" // another scheme than Bearer: no key
				if scheme, rest, ok := strings.Cut(auth, " "); ok && strings.EqualFold(scheme, "Bearer") {
					key = rest
				}
			}
			var ok bool
			if tenant, ok = s.cfg.Tenants.Tenant(strings.TrimSpace(key)); !ok {
				w.Header().Set("WWW-Authenticate", `Bearer realm="quorum"`)
				writeJSON(w, http.StatusUnauthorized, apiError{Error: "a valid API key is required (Authorization: Bearer KEY)"})
				return
			}
		}
		h(w, r.WithContext(context.WithValue(r.Context(), tenantKey{}, tenant)))
	}
}

func tenantOf(r *http.Request) string { t, _ := r.Context().Value(tenantKey{}).(string); return t }

// askRequest is POST /v1/questions' body.
type askRequest struct {
	DB                string            `json:"db"`
	Dialect           string            `json:"dialect"`
	Question          string            `json:"question"`
	ExternalKnowledge string            `json:"external_knowledge"`
	Agent             string            `json:"agent"`
	Votes             int               `json:"votes"`
	Options           map[string]string `json:"options"`
	Cache             *bool             `json:"cache"`
	// FollowUpOf names an earlier answered question of the tenant's on
	// the same database: its question and SQL (and its own earlier turns)
	// go to the agent as the conversation so far.
	FollowUpOf string `json:"follow_up_of"`
}

// accepted is POST's answer.
type accepted struct {
	ID     string `json:"id"`
	Status string `json:"status"`
	Cached bool   `json:"cached,omitempty"`
}

func (s *Server) postQuestion(w http.ResponseWriter, r *http.Request) {
	ctx := r.Context()
	tenant := tenantOf(r)
	hold, ok := s.admitTenant(w, r)
	if !ok {
		return
	}
	defer func() { s.quota.release(ctx, tenant, hold) }() // "" once the question holds it
	q, ok := s.parseQuestion(w, r)
	if !ok {
		return
	}
	q.Tenant = tenant
	if tracer := s.cfg.Env.Exporter.Tracer(); tracer != nil {
		// The question's trace starts at the request (continuing the
		// caller's, when it sent a traceparent).
		sctx, span := tracer.Start(propagation.TraceContext{}.Extract(ctx, propagation.HeaderCarrier(r.Header)), "POST /v1/questions",
			oteltrace.WithSpanKind(oteltrace.SpanKindServer), oteltrace.WithAttributes(attribute.String("http.request.method", "POST"),
				attribute.String("http.route", "/v1/questions"), attribute.String("quorum.tenant", tenant)))
		defer span.End()
		q.TraceParent = trace.Traceparent(sctx)
	}
	if q.followUp != "" {
		msg, err := s.followUp(ctx, tenant, q.followUp, q)
		if err != nil {
			writeJSON(w, http.StatusServiceUnavailable, apiError{Error: err.Error()})
			return
		}
		if msg != "" {
			badField(w, "follow_up_of", "%s", msg)
			return
		}
	}
	unknown := s.sim != nil && !s.sim.Knows(q.DB, q.Question.Question)
	if s.cfg.VerifiedExamples && !unknown {
		ex, err := s.verifiedFor(ctx, tenant, q.db, q.Question.Question)
		if err != nil {
			writeJSON(w, http.StatusServiceUnavailable, apiError{Error: err.Error()})
			return
		}
		q.Examples = ex
	}
	if len(q.Turns) > 0 || len(q.Examples) > 0 {
		// The answer depends on more than the cache key says.
		q.NoCache = true
	}
	id, err := s.ids.mint(ctx, tenant)
	if err != nil {
		writeJSON(w, http.StatusServiceUnavailable, apiError{Error: err.Error()})
		return
	}
	q.ID = id
	idem := r.Header.Get("Idempotency-Key")
	unavailable := func(err error) {
		if idem != "" {
			s.store.releaseIdempotent(context.WithoutCancel(ctx), tenant, idem, q.ID)
		}
		writeJSON(w, http.StatusServiceUnavailable, apiError{Error: err.Error()})
	}
	if idem != "" {
		id, fresh, err := s.store.claimIdempotent(ctx, tenant, idem, q.ID)
		if err != nil {
			writeJSON(w, http.StatusServiceUnavailable, apiError{Error: err.Error()})
			return
		}
		if !fresh {
			s.resend(w, r, id)
			return
		}
	}
	if s.cfg.CacheTTL >= 0 && !q.NoCache {
		fp, err := s.fingerprint(ctx, q.db)
		if err != nil {
			unavailable(err)
			return
		}
		q.Fingerprint = fp
	}
	if hit, ok := s.cached(ctx, &q.Question); ok {
		q.Status, q.Cached, q.Finished = Answered, true, time.Now().UTC()
		q.SQL, q.Columns, q.Rows, q.RowCount, q.Truncated = hit.SQL, hit.Columns, hit.Rows, hit.RowCount, hit.Truncated
		q.Understood = Understood(q.SQL, warehouse.Dialect(q.Dialect))
		q.Confidence, q.Method, q.Candidates, q.Valid, q.Agreed, q.Gold = hit.Confidence, hit.Method, hit.Candidates, hit.Valid, hit.Agreed, hit.Gold
	}
	if unknown && !q.Cached {
		// Run, the simulator would answer a generic SELECT 1 that reads
		// as a real answer: say what is true instead.
		q.Finished = time.Now().UTC()
		noAnswer(&q.Question, "(GET /v1/databases/"+q.DB+"/examples lists them)")
	}
	if err := s.store.put(ctx, &q.Question); err != nil {
		unavailable(err)
		return
	}
	s.remember(ctx, &q.Question)
	if err := s.holdTokens(ctx, &q.Question, hold); err != nil {
		// Its admission's reservation lapsed while it was stored, and the
		// tenant's tokens are taken now: it ends refused, saying so.
		q.Status, q.Finished, q.Error = Failed, time.Now().UTC(), "refused: "+err.Error()
		if err := s.store.put(ctx, &q.Question); err != nil {
			s.cfg.Log.Warn("recording a question refused its tokens", zap.String("question", q.ID), zap.Error(err))
		}
	}
	hold = ""
	if q.Cached || q.NoAnswer || q.Status == Failed {
		s.finished(ctx, &q.Question)
	} else {
		// The question is stored before it is started: from here on a
		// crash loses nothing, the next driver picks it up.
		s.start(s.baseCtx(), q.ID)
	}
	s.cfg.Log.Info("question accepted", zap.String("question", q.ID), zap.String("tenant", tenant), zap.String("db", q.DB), zap.Bool("cached", q.Cached))
	writeJSON(w, http.StatusAccepted, accepted{ID: q.ID, Status: q.Status, Cached: q.Cached})
}

// noAnswer marks q as one the simulated LLM has no answer for; where
// says where its questions are listed.
func noAnswer(q *Question, where string) {
	q.Status, q.NoAnswer = Failed, true
	q.Error = "the simulator has no answer for this question: the simulated LLM (llmsim) answers only the questions of its dataset " +
		where + "; configure a real model (--llm-base-url) to ask anything"
}

// resend answers a repeated Idempotency-Key with the first request's
// question, doing nothing new.
func (s *Server) resend(w http.ResponseWriter, r *http.Request, id string) {
	for range 20 { // the first request may still be storing it
		rec, err := s.store.get(r.Context(), id)
		if err == nil {
			writeJSON(w, http.StatusAccepted, accepted{ID: id, Status: rec.Status, Cached: rec.Cached})
			return
		}
		if !errors.Is(err, errNoQuestion) {
			break
		}
		time.Sleep(50 * time.Millisecond)
	}
	writeJSON(w, http.StatusConflict, apiError{Error: "the Idempotency-Key names a question that could not be read; retry later"})
}

// pendingQuestion is a parsed request with its database.
type pendingQuestion struct {
	Question
	db       *Database
	followUp string
}

// parseQuestion reads and checks the body; on bad input it has answered
// 400 naming the field.
func (s *Server) parseQuestion(w http.ResponseWriter, r *http.Request) (*pendingQuestion, bool) {
	var req askRequest
	var raw json.RawMessage
	dec := json.NewDecoder(http.MaxBytesReader(w, r.Body, MaxBodyBytes))
	err := dec.Decode(&raw)
	if err == nil && dec.More() {
		writeJSON(w, http.StatusBadRequest, apiError{Error: "malformed JSON body: more than one value"})
		return nil, false
	}
	if err == nil {
		err = strictDecode(raw, &req)
	}
	if err != nil {
		var tooBig *http.MaxBytesError
		if errors.As(err, &tooBig) {
			writeJSON(w, http.StatusRequestEntityTooLarge, apiError{Error: fmt.Sprintf("the body is over %d bytes", MaxBodyBytes)})
			return nil, false
		}
		var unknown unknownFieldError
		if errors.As(err, &unknown) {
			badField(w, string(unknown), "unknown field (field names are case-sensitive)")
			return nil, false
		}
		var ute *json.UnmarshalTypeError
		if errors.As(err, &ute) {
			want := ute.Type.Kind().String()
			switch want {
			case "int", "int64", "float64":
				want = "number"
			case "map", "struct":
				want = "object"
			case "ptr":
				want = "boolean"
			}
			badField(w, ute.Field, "want a %s, not a JSON %s", want, ute.Value)
			return nil, false
		}
		writeJSON(w, http.StatusBadRequest, apiError{Error: "malformed JSON body: " + err.Error()})
		return nil, false
	}
	if req.DB == "" {
		badField(w, "db", "required (GET /v1/databases lists them)")
		return nil, false
	}
	db, n := s.database(req.DB, req.Dialect)
	switch {
	case n == 0:
		badField(w, "db", "unknown database %q (GET /v1/databases lists them)", req.DB)
		return nil, false
	case n > 1:
		badField(w, "dialect", "database %q exists in several dialects: name one", req.DB)
		return nil, false
	}
	q := &pendingQuestion{db: db, followUp: strings.TrimSpace(req.FollowUpOf), Question: Question{ID: newID(), Status: Queued, DB: db.Name, Dialect: db.Dialect,
		Question: strings.TrimSpace(req.Question), ExternalKnowledge: req.ExternalKnowledge, Agent: req.Agent, Votes: req.Votes,
		Created: time.Now().UTC(), NoCache: req.Cache != nil && !*req.Cache}}
	if q.Agent == "" {
		q.Agent = s.cfg.DefaultAgent
	}
	if q.Votes == 0 {
		q.Votes = s.cfg.Votes
	}
	def, err := s.cfg.Env.Agents.Lookup(q.Agent)
	if err != nil {
		badField(w, "agent", "%v", err)
		return nil, false
	}
	if q.Votes < 1 || q.Votes > MaxVotes {
		badField(w, "votes", "%d: use 1 to %d", q.Votes, MaxVotes)
		return nil, false
	}
	// What a question may set of the agent's options is the agent's
	// allow-list, each value within its bound (agent.Option.Asker): the
	// rest spend the operator's quotas as only the operator may.
	var bad *agent.OptionError
	if err := def.CheckAsked(req.Options); errors.As(err, &bad) {
		badField(w, "options."+bad.Option, "%v", bad.Err)
		return nil, false
	}
	// The question's votes set the agent's votes option unless the
	// options do (agent.OptVotes).
	if q.Options, err = def.RunOptions(req.Options, q.Votes); err != nil {
		badField(w, "options", "%v", err)
		return nil, false
	}
	text := q.Question.Question
	q.Example = ExampleID(q.DB, text, q.ExternalKnowledge)
	if e := s.datasetExample(&q.Question); e != nil && q.followUp == "" {
		// The dataset's own id, which every seed derives from: the same
		// answer as a dataset run with this --seed, as the flag says.
		q.Example = e.ID
	}
	dq := dataset.Question{ID: q.Example, DB: q.DB, Dialect: db.db.Dialect, Question: text, ExternalKnowledge: q.ExternalKnowledge}
	if err := dq.Check(s.ds); err != nil {
		field, _, _ := strings.Cut(err.Error(), ":")
		badField(w, field, "%s", strings.TrimSpace(strings.TrimPrefix(err.Error(), field+":")))
		return nil, false
	}
	return q, true
}

// owned returns the tenant's question id, or answers 404: another
// tenant's question does not exist for this one. Whether an id is the
// tenant's is told by its tag, before Redis is read, so another tenant's
// question and a missing one cost the same (no timing tells them apart).
func (s *Server) owned(w http.ResponseWriter, r *http.Request) (*Question, bool) {
	id := r.PathValue("id")
	if err := s.ids.check(r.Context(), tenantOf(r), id); err != nil {
		if errors.Is(err, errNotOwned) {
			writeJSON(w, http.StatusNotFound, apiError{Error: fmt.Sprintf("no question %q", id)})
		} else {
			writeJSON(w, http.StatusServiceUnavailable, apiError{Error: err.Error()})
		}
		return nil, false
	}
	rec, err := s.store.get(r.Context(), id)
	if errors.Is(err, errNoQuestion) || (err == nil && rec.Tenant != tenantOf(r)) {
		writeJSON(w, http.StatusNotFound, apiError{Error: fmt.Sprintf("no question %q", id)})
		return nil, false
	}
	if err != nil {
		writeJSON(w, http.StatusServiceUnavailable, apiError{Error: err.Error()})
		return nil, false
	}
	return &rec.Question, true
}

func (s *Server) getQuestion(w http.ResponseWriter, r *http.Request) {
	if q, ok := s.owned(w, r); ok {
		writeJSON(w, http.StatusOK, q)
	}
}

func (s *Server) cancelQuestion(w http.ResponseWriter, r *http.Request) {
	q, ok := s.owned(w, r)
	if !ok {
		return
	}
	q, err := s.cancel(r.Context(), q.ID)
	if err != nil {
		writeJSON(w, http.StatusServiceUnavailable, apiError{Error: err.Error()})
		return
	}
	writeJSON(w, http.StatusOK, q)
}

func (s *Server) listDatabases(w http.ResponseWriter, _ *http.Request) {
	writeJSON(w, http.StatusOK, map[string]any{"databases": s.dbs})
}

// decodeBody reads the request's JSON body into v (a pointer to a struct)
// as strictDecode does; on a bad body it has answered 400, naming an
// unknown field or saying what is malformed.
func decodeBody(w http.ResponseWriter, r *http.Request, v any) bool {
	var raw json.RawMessage
	if err := json.NewDecoder(http.MaxBytesReader(w, r.Body, MaxBodyBytes)).Decode(&raw); err != nil {
		writeJSON(w, http.StatusBadRequest, apiError{Error: "malformed JSON body: " + err.Error()})
		return false
	}
	if err := strictDecode(raw, v); err != nil {
		var unknown unknownFieldError
		if errors.As(err, &unknown) {
			badField(w, string(unknown), "unknown field (field names are case-sensitive)")
			return false
		}
		writeJSON(w, http.StatusBadRequest, apiError{Error: "malformed JSON body: " + err.Error()})
		return false
	}
	return true
}

// unknownFieldError names a body field that is not in the API.
type unknownFieldError string

func (e unknownFieldError) Error() string { return "unknown field " + string(e) }

// strictDecode decodes a JSON object into v (a pointer to a struct) with
// field names matched exactly: encoding/json alone matches them
// case-insensitively, so {"DB": ...} would pass for db.
func strictDecode(raw json.RawMessage, v any) error {
	var fields map[string]json.RawMessage
	if err := json.Unmarshal(raw, &fields); err == nil {
		known := jsonNames(reflect.TypeOf(v).Elem())
		names := make([]string, 0, len(fields))
		for k := range fields {
			names = append(names, k)
		}
		sort.Strings(names) // the same field named whatever the map's order
		for _, k := range names {
			if !known[k] {
				return unknownFieldError(k)
			}
		}
	}
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.DisallowUnknownFields()
	return dec.Decode(v)
}

// jsonNames are a struct's JSON field names.
func jsonNames(t reflect.Type) map[string]bool {
	names := map[string]bool{}
	for i := range t.NumField() {
		f := t.Field(i)
		name, _, _ := strings.Cut(f.Tag.Get("json"), ",")
		if name == "-" || !f.IsExported() {
			continue
		}
		if name == "" {
			name = f.Name
		}
		names[name] = true
	}
	return names
}
