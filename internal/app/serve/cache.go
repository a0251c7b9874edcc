package serve

import (
	"context"
	"encoding/json"
	"fmt"
	"sort"
	"strconv"
	"strings"

	"github.com/quorumsql/quorum/internal/rdb"
	"github.com/redis/go-redis/v9"
)

// cacheKey names an answer by its tenant and what decides it: the
// database, the question normalised, the knowledge, the agent and its
// options, the votes, and the server's seed and LLM. The tenant is in the
// key, not the hash: another tenant asking the same is never given this
// tenant's SQL and rows, nor an answer this tenant paid for.
func (s *Server) cacheKey(q *Question) string {
	opts := make([]string, 0, len(q.Options))
	for k, v := range q.Options {
		opts = append(opts, k+"="+v)
	}
	sort.Strings(opts)
	return rdb.AnswerCacheKey(q.Tenant, hashKey(q.Dialect, q.DB, normalize(q.Question), strings.TrimSpace(q.ExternalKnowledge), q.Agent,
		strings.Join(opts, ","), strconv.Itoa(q.Votes), strconv.FormatUint(s.cfg.Seed, 10), s.cfg.LLM))
}

// fingerprint is the database's schema fingerprint ("" when unknown).
func (s *Server) fingerprint(ctx context.Context, db *Database) (string, error) {
	if s.cfg.Fingerprint == nil {
		return "", nil
	}
	fp, err := s.cfg.Fingerprint(ctx, db.db)
	if err != nil {
		return "", fmt.Errorf("schema fingerprint of %s: %w", db.Name, err)
	}
	return fp, nil
}

// cached returns the stored answer of an equal question asked on the same
// schema within the TTL.
func (s *Server) cached(ctx context.Context, q *Question) (*Question, bool) {
	if s.cfg.CacheTTL < 0 || q.NoCache {
		return nil, false
	}
	b, err := s.cfg.Redis.Get(ctx, s.cacheKey(q)).Bytes()
	if err != nil {
		return nil, false
	}
	var hit record
	if json.Unmarshal(b, &hit) != nil || hit.Fingerprint != q.Fingerprint {
		return nil, false
	}
	return &hit.Question, true
}

// cacheIn queues q's answer into the cache, in the transaction that
// records it: a client that sees the answer and asks again is answered
// from the cache (written after, the second question could miss it).
func (s *Server) cacheIn(ctx context.Context, p redis.Pipeliner, q *Question) {
	if s.cfg.CacheTTL < 0 || q.Status != Answered || q.Cached || q.NoCache {
		return
	}
	if b, err := json.Marshal(record{Question: *q, Fingerprint: q.Fingerprint}); err == nil {
		p.Set(ctx, s.cacheKey(q), b, s.cfg.CacheTTL)
	}
}
