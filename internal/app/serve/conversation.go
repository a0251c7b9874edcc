package serve

import (
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

	"github.com/quorumsql/quorum/internal/rdb"
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
// offered to the agent as an example for later similar questions on the
// same database when Config.VerifiedExamples is on.
type VerifiedPair struct {
	Question string    `json:"question"`
	SQL      string    `json:"sql"`
	From     string    `json:"from"` // the question id it came from
	Time     time.Time `json:"time"`
}

// Retrieval of verified pairs: at most maxExamples, each sharing at least
// minSimilarity of its words with the question (Jaccard over content
// words), so an unrelated pair never reaches the prompt.
const (
	maxExamples   = 3
	minSimilarity = 0.3
	historyMax    = 200
)

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

// verifiedFor returns the verified pairs of db most similar to question.
func (s *Server) verifiedFor(ctx context.Context, db *Database, question string) ([]VerifiedPair, error) {
	all, err := s.cfg.Redis.HGetAll(ctx, rdb.VerifiedKey(db.Name, db.Dialect)).Result()
	if err != nil {
		return nil, fmt.Errorf("verified examples of %s: %w", db.Name, err)
	}
	want := words(question)
	type scored struct {
		p VerifiedPair
		s float64
	}
	var found []scored
	for _, v := range all {
		var p VerifiedPair
		if json.Unmarshal([]byte(v), &p) != nil {
			continue
		}
		if sim := similarity(want, words(p.Question)); sim >= minSimilarity {
			found = append(found, scored{p, sim})
		}
	}
	sort.Slice(found, func(i, j int) bool {
		if found[i].s != found[j].s {
			return found[i].s > found[j].s
		}
		return found[i].p.Question < found[j].p.Question
	})
	var out []VerifiedPair
	for i := 0; i < len(found) && i < maxExamples; i++ {
		out = append(out, found[i].p)
	}
	return out, nil
}

// remember adds a question to its tenant's history.
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

// postFeedback records a verdict on an answer. An "up" verifies the
// answer's question and SQL for its database; a "down" with a corrected
// SQL verifies that SQL instead; a "down" without one withdraws the pair
// if it was this answer's.
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
	k, field := rdb.VerifiedKey(q.DB, q.Dialect), normalize(q.Question)
	switch {
	case req.Verdict == "up" || req.SQL != "":
		sql := q.SQL
		if req.SQL != "" {
			sql = req.SQL
		}
		b, _ := json.Marshal(VerifiedPair{Question: q.Question, SQL: sql, From: q.ID, Time: fb.Time})
		err = s.cfg.Redis.HSet(ctx, k, field, b).Err()
	default:
		var prev VerifiedPair
		if v, gerr := s.cfg.Redis.HGet(ctx, k, field).Result(); gerr == nil && json.Unmarshal([]byte(v), &prev) == nil && prev.SQL == q.SQL {
			err = s.cfg.Redis.HDel(ctx, k, field).Err()
		}
	}
	if err != nil {
		writeJSON(w, http.StatusServiceUnavailable, apiError{Error: "storing the verified pair: " + err.Error()})
		return
	}
	writeJSON(w, http.StatusOK, &rec.Question)
}
