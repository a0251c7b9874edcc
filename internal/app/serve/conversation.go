package serve

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"
	"go.uber.org/zap"

	"github.com/quorumsql/quorum/internal/rdb"
	"github.com/quorumsql/quorum/pkg/warehouse"
)

// Turn is an earlier question of a conversation and the SQL that answered
// it: what a follow-up question carries to the agent.
type Turn struct {
	ID       string `json:"id"`
	Question string `json:"question"`
	SQL      string `json:"sql"`
}

// MaxTurns bounds the earlier turns a follow-up carries: the last ones
// matter, and the prompt stays short.
const MaxTurns = 3

// Feedback is a user's verdict on an answer.
type Feedback struct {
	// Verdict is "up" (the answer is right) or "down".
	Verdict string `json:"verdict"`
	// SQL is the corrected SQL a user gave with a "down" (optional).
	SQL  string    `json:"sql,omitempty"`
	Time time.Time `json:"time"`
}

// VerifiedPair is a question and SQL a user marked right (or corrected):
// offered to the agent as an example for the same tenant's later similar
// questions on the same database when Config.VerifiedExamples is on (every
// tenant's with Config.SharedVerifiedExamples).
type VerifiedPair struct {
	Question string `json:"question"`
	SQL      string `json:"sql"`
	// From is the question id it came from; empty when that question is
	// another tenant's (the shared pool).
	From string    `json:"from"`
	Time time.Time `json:"time"`
}

// storedPair is a verified pair as Redis keeps it: with the tenant whose
// feedback made it, so that the shared pool shows no tenant another's
// question id and lets no tenant withdraw another's pair.
type storedPair struct {
	VerifiedPair
	Tenant string `json:"tenant"`
}

// Retrieval of verified pairs: at most maxExamples, each sharing at least
// minSimilarity of its words with the question (Jaccard over content
// words), so an unrelated pair never reaches the prompt.
const (
	maxExamples   = 3
	minSimilarity = 0.3
	historyMax    = 200
)

// verifiedCap bounds the pairs kept per tenant and database, the oldest
// evicted first. Retrieval ranks the index's normalised questions (about
// 100 bytes each, some 50 KB at the cap) and reads only the few pairs it
// offers, and each pair takes an answered question of the tenant's, so 500
// holds more than a team verifies on one database within VerifiedTTL
// while bounding what one tenant stores per database (500 SQL texts of at
// most 64 KiB).
const verifiedCap = 500

// context is what the agent is told besides the question: the user's
// external knowledge, then the conversation so far, then the verified
// examples. It is the run's external knowledge (so the manifest records
// it); the question's Example id stays that of what the user asked.
func (q *Question) context() string {
	var parts []string
	if k := strings.TrimSpace(q.ExternalKnowledge); k != "" {
		parts = append(parts, k)
	}
	if len(q.Turns) > 0 {
		var b strings.Builder
		b.WriteString("This question follows up earlier questions of the same conversation; read it in their light (the SQL answered each):")
		for i, t := range q.Turns {
			fmt.Fprintf(&b, "\nEarlier question %d: %s\nIts SQL:\n%s", i+1, t.Question, t.SQL)
		}
		parts = append(parts, b.String())
	}
	if len(q.Examples) > 0 {
		var b strings.Builder
		b.WriteString("Users of this database verified these question and SQL pairs as right; use them where they fit:")
		for i, p := range q.Examples {
			fmt.Fprintf(&b, "\nVerified example %d: %s\nSQL:\n%s", i+1, p.Question, p.SQL)
		}
		parts = append(parts, b.String())
	}
	return strings.Join(parts, "\n\n")
}

// followUp fills q.Turns from the tenant's earlier question id: its own
// turns and itself. The earlier question must be the tenant's, on the same
// database, and answered.
func (s *Server) followUp(ctx context.Context, tenant, id string, q *pendingQuestion) (string, error) {
	if err := s.ids.check(ctx, tenant, id); err != nil {
		if errors.Is(err, errNotOwned) {
			return "no question " + strconv.Quote(id), nil
		}
		return "", err
	}
	r, err := s.store.get(ctx, id)
	if errors.Is(err, errNoQuestion) || (err == nil && r.Tenant != tenant) {
		return "no question " + strconv.Quote(id), nil
	}
	if err != nil {
		return "", err
	}
	if r.Status != Answered || r.SQL == "" {
		return fmt.Sprintf("question %s is %s: only an answered question can be followed up", id, r.Status), nil
	}
	if r.DB != q.DB || r.Dialect != q.Dialect {
		return fmt.Sprintf("question %s is about %s (%s), not %s", id, r.DB, r.Dialect, q.DB), nil
	}
	turns := append(append([]Turn(nil), r.Turns...), Turn{ID: r.ID, Question: r.Question.Question, SQL: r.SQL})
	if len(turns) > MaxTurns {
		turns = turns[len(turns)-MaxTurns:]
	}
	q.Turns, q.FollowUpOf = turns, id
	return "", nil
}

// words are a text's content words, lower-cased, for similarity.
func words(text string) map[string]bool {
	out := map[string]bool{}
	for _, w := range strings.FieldsFunc(strings.ToLower(text), func(r rune) bool {
		return !(r >= 'a' && r <= 'z' || r >= '0' && r <= '9' || r == '_')
	}) {
		if len(w) > 2 && !stopWords[w] {
			out[w] = true
		}
	}
	return out
}

var stopWords = map[string]bool{"the": true, "and": true, "for": true, "what": true, "which": true, "how": true, "many": true,
	"does": true, "are": true, "was": true, "were": true, "with": true, "give": true, "each": true, "that": true, "this": true,
	"from": true, "have": true, "has": true, "its": true, "their": true, "all": true, "not": true, "list": true, "show": true}

// similarity is the Jaccard index of two texts' content words.
func similarity(a, b map[string]bool) float64 {
	if len(a) == 0 || len(b) == 0 {
		return 0
	}
	n := 0
	for w := range a {
		if b[w] {
			n++
		}
	}
	return float64(n) / float64(len(a)+len(b)-n)
}

// verifiedKeys are the pairs (by normalised question) and their index
// that tenant's questions on a database read and its feedback writes: the
// tenant's own, or the shared pool by the operator's choice.
func (s *Server) verifiedKeys(tenant, db, dialect string) (pairs, index string) {
	if s.cfg.SharedVerifiedExamples {
		tenant = ""
	}
	return rdb.VerifiedKey(tenant, db, dialect), rdb.VerifiedIndexKey(tenant, db, dialect)
}

// verifiedTTL is how long a pair is offered after it was verified.
func (s *Server) verifiedTTL() time.Duration { return cmp.Or(s.cfg.VerifiedTTL, s.cfg.Retain.State) }

// verifiedFor returns the tenant's verified pairs of db most similar to
// question, verified within verifiedTTL.
func (s *Server) verifiedFor(ctx context.Context, tenant string, db *Database, question string) ([]VerifiedPair, error) {
	pairs, index := s.verifiedKeys(tenant, db.Name, db.Dialect)
	since := time.Now().Add(-s.verifiedTTL()).UnixMilli()
	fields, err := s.cfg.Redis.ZRangeByScore(ctx, index, &redis.ZRangeBy{Min: "(" + strconv.FormatInt(since, 10), Max: "+inf"}).Result()
	if err != nil {
		return nil, fmt.Errorf("verified examples of %s for tenant %s: %w", db.Name, tenant, err)
	}
	chosen := mostSimilar(question, fields)
	if len(chosen) == 0 {
		return nil, nil
	}
	vals, err := s.cfg.Redis.HMGet(ctx, pairs, chosen...).Result()
	if err != nil {
		return nil, fmt.Errorf("verified examples of %s for tenant %s: %w", db.Name, tenant, err)
	}
	var out []VerifiedPair
	for _, v := range vals {
		var p storedPair
		if str, ok := v.(string); !ok || json.Unmarshal([]byte(str), &p) != nil {
			continue
		}
		if p.Tenant != tenant {
			p.From = "" // another tenant's question id is not this one's to know
		}
		out = append(out, p.VerifiedPair)
	}
	return out, nil
}

// mostSimilar picks the fields (normalised questions, whose content words
// are the questions') most like question: at most maxExamples, each at
// least minSimilarity like it, the most similar first.
func mostSimilar(question string, fields []string) []string {
	want := words(question)
	type scored struct {
		field string
		s     float64
	}
	var found []scored
	for _, f := range fields {
		if sim := similarity(want, words(f)); sim >= minSimilarity {
			found = append(found, scored{f, sim})
		}
	}
	sort.Slice(found, func(i, j int) bool {
		if found[i].s != found[j].s {
			return found[i].s > found[j].s
		}
		return found[i].field < found[j].field
	})
	var out []string
	for i := 0; i < len(found) && i < maxExamples; i++ {
		out = append(out, found[i].field)
	}
	return out
}

// putVerified stores q's pair for its tenant's later similar questions,
// evicting in the same transaction the pairs verified longer than
// verifiedTTL ago and, beyond verifiedCap, the oldest; both keys expire
// verifiedTTL after the newest pair.
func (s *Server) putVerified(ctx context.Context, q *Question, p storedPair) error {
	pairs, index := s.verifiedKeys(q.Tenant, q.DB, q.Dialect)
	field, ttl, at := normalize(q.Question), s.verifiedTTL(), p.Time.UnixMilli()
	b, err := json.Marshal(p)
	if err != nil {
		return err
	}
	for range 10 {
		err = s.cfg.Redis.Watch(ctx, func(tx *redis.Tx) error {
			kept, err := tx.ZRangeWithScores(ctx, index, 0, -1).Result()
			if err != nil {
				return err
			}
			evict := evicted(kept, field, at-ttl.Milliseconds(), verifiedCap-1)
			_, err = tx.TxPipelined(ctx, func(pipe redis.Pipeliner) error {
				pipe.HSet(ctx, pairs, field, b)
				pipe.ZAdd(ctx, index, redis.Z{Score: float64(at), Member: field})
				if len(evict) > 0 {
					pipe.HDel(ctx, pairs, evict...)
					pipe.ZRem(ctx, index, toAny(evict)...)
				}
				pipe.PExpire(ctx, pairs, ttl)
				pipe.PExpire(ctx, index, ttl)
				return nil
			})
			return err
		}, index)
		if !errors.Is(err, redis.TxFailedErr) {
			break
		}
	}
	if err != nil {
		return fmt.Errorf("verified pair of question %s: %w", q.ID, err)
	}
	return nil
}

// evicted are the fields of kept (by score, oldest first) to drop so that
// at most room remain beside field and none verified at or before cutoff.
func evicted(kept []redis.Z, field string, cutoff int64, room int) []string {
	others := make([]redis.Z, 0, len(kept))
	for _, z := range kept {
		if z.Member != field {
			others = append(others, z)
		}
	}
	var out []string
	for i, z := range others {
		if int64(z.Score) <= cutoff || len(others)-i > room {
			out = append(out, z.Member.(string))
		}
	}
	return out
}

func toAny(ss []string) []any {
	out := make([]any, len(ss))
	for i, s := range ss {
		out[i] = s
	}
	return out
}

// withdrawVerified drops the tenant's pair of q's question if it is q's
// answer (a "down" without a correction).
func (s *Server) withdrawVerified(ctx context.Context, q *Question) error {
	pairs, index := s.verifiedKeys(q.Tenant, q.DB, q.Dialect)
	field := normalize(q.Question)
	v, err := s.cfg.Redis.HGet(ctx, pairs, field).Result()
	if errors.Is(err, redis.Nil) {
		return nil
	}
	var prev storedPair
	if err != nil || json.Unmarshal([]byte(v), &prev) != nil || prev.SQL != q.SQL || prev.Tenant != q.Tenant {
		return err
	}
	_, err = s.cfg.Redis.TxPipelined(ctx, func(p redis.Pipeliner) error {
		p.HDel(ctx, pairs, field)
		p.ZRem(ctx, index, field)
		return nil
	})
	return err
}

// verify applies feedback to the tenant's verified pairs. An "up"
// verifies the answer's question and SQL; a "down" with a corrected SQL
// verifies that SQL instead, so the tenant's later similar questions are
// offered the correction, not the answer; a "down" without one withdraws
// the pair if it is this answer's. Only SQL the read-only guard admits
// for the database's dialect is stored: it reaches the agent's prompts as
// verified.
func (s *Server) verify(ctx context.Context, q *Question, fb *Feedback) error {
	if fb.Verdict == "down" && fb.SQL == "" {
		return s.withdrawVerified(ctx, q)
	}
	sql := cmp.Or(fb.SQL, q.SQL)
	if _, err := warehouse.Admit(warehouse.Dialect(q.Dialect), sql); err != nil {
		// The answer's own SQL passed the guard when it ran; refused now
		// (a stricter guard), it is not offered as an example.
		s.cfg.Log.Warn("an answer's SQL is no longer admitted: not verified", zap.String("question", q.ID), zap.Error(err))
		return nil
	}
	return s.putVerified(ctx, q, storedPair{VerifiedPair: VerifiedPair{Question: q.Question, SQL: sql, From: q.ID, Time: fb.Time}, Tenant: q.Tenant})
}

// remember adds a stored question to its tenant's history: postQuestion
// calls it once per stored question.
func (s *Server) remember(ctx context.Context, q *Question) {
	k := rdb.HistoryKey(q.Tenant)
	_, _ = s.cfg.Redis.TxPipelined(ctx, func(p redis.Pipeliner) error {
		p.ZAdd(ctx, k, redis.Z{Score: float64(q.Created.UnixMilli()), Member: q.ID})
		p.ZRemRangeByRank(ctx, k, 0, -historyMax-1)
		p.Expire(ctx, k, s.cfg.Retain.State)
		return nil
	})
}

// historyItem is one line of GET /v1/questions.
type historyItem struct {
	ID         string    `json:"id"`
	Status     string    `json:"status"`
	DB         string    `json:"db"`
	Dialect    string    `json:"dialect"`
	Question   string    `json:"question"`
	Confidence string    `json:"confidence,omitempty"`
	FollowUpOf string    `json:"follow_up_of,omitempty"`
	Feedback   string    `json:"feedback,omitempty"`
	Created    time.Time `json:"created"`
}

// listQuestions is the tenant's latest questions, newest first.
func (s *Server) listQuestions(w http.ResponseWriter, r *http.Request) {
	limit := 50
	if v := r.URL.Query().Get("limit"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 || n > historyMax {
			badField(w, "limit", "%q: use 1 to %d", v, historyMax)
			return
		}
		limit = n
	}
	ctx := r.Context()
	ids, err := s.cfg.Redis.ZRevRange(ctx, rdb.HistoryKey(tenantOf(r)), 0, int64(limit-1)).Result()
	if err != nil {
		writeJSON(w, http.StatusServiceUnavailable, apiError{Error: "reading the history: " + err.Error()})
		return
	}
	items := []historyItem{}
	for _, id := range ids {
		rec, err := s.store.get(ctx, id)
		if err != nil || rec.Tenant != tenantOf(r) {
			continue // expired
		}
		it := historyItem{ID: rec.ID, Status: rec.Status, DB: rec.DB, Dialect: rec.Dialect, Question: rec.Question.Question,
			Confidence: rec.Confidence, FollowUpOf: rec.FollowUpOf, Created: rec.Created}
		if rec.Feedback != nil {
			it.Feedback = rec.Feedback.Verdict
		}
		items = append(items, it)
	}
	writeJSON(w, http.StatusOK, map[string]any{"questions": items})
}

// feedbackRequest is POST /v1/questions/{id}/feedback's body.
type feedbackRequest struct {
	Verdict string `json:"verdict"`
	SQL     string `json:"sql"`
}

// postFeedback records a verdict on an answer and applies it to the
// tenant's verified pairs (verify). A corrected SQL must pass the
// read-only guard of the question's dialect: refused, nothing is stored.
func (s *Server) postFeedback(w http.ResponseWriter, r *http.Request) {
	q, ok := s.owned(w, r)
	if !ok {
		return
	}
	var req feedbackRequest
	if !decodeBody(w, r, &req) {
		return
	}
	req.SQL = strings.TrimSpace(req.SQL)
	switch {
	case req.Verdict != "up" && req.Verdict != "down":
		badField(w, "verdict", "%q: want \"up\" or \"down\"", req.Verdict)
		return
	case req.Verdict == "up" && req.SQL != "":
		badField(w, "sql", "a corrected SQL goes with a \"down\"")
		return
	case len(req.SQL) > 65536:
		badField(w, "sql", "over 65536 bytes")
		return
	case q.Status != Answered:
		writeJSON(w, http.StatusConflict, apiError{Error: fmt.Sprintf("question %s is %s: only an answer takes feedback", q.ID, q.Status)})
		return
	}
	if req.SQL != "" {
		if _, err := warehouse.Admit(warehouse.Dialect(q.Dialect), req.SQL); err != nil {
			badField(w, "sql", "%s", err.Error())
			return
		}
	}
	ctx := r.Context()
	fb := &Feedback{Verdict: req.Verdict, SQL: req.SQL, Time: time.Now().UTC()}
	// The record is final, so update (which leaves terminal questions
	// alone) does not apply: the feedback is written on its own.
	rec, err := s.store.get(ctx, q.ID)
	if err != nil {
		writeJSON(w, http.StatusServiceUnavailable, apiError{Error: err.Error()})
		return
	}
	rec.Question.Feedback = fb
	if err := s.store.put(ctx, &rec.Question); err != nil {
		writeJSON(w, http.StatusServiceUnavailable, apiError{Error: err.Error()})
		return
	}
	if err := s.verify(ctx, q, fb); err != nil {
		writeJSON(w, http.StatusServiceUnavailable, apiError{Error: "storing the verified pair: " + err.Error()})
		return
	}
	writeJSON(w, http.StatusOK, &rec.Question)
}
