package rdb

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	mrand "math/rand/v2"
	"strconv"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"
)

// Tenants' token reservations: internal/app/serve (tenants.go) admits a
// question against its tenant's daily token limit by reserving the tokens
// it is expected to cost, before it runs, and releases the reservation in
// the transaction that charges what it cost. Admission therefore sees the
// day's charged tokens plus what the questions still running hold.
//
// The ledger (ReservedKey) has one field per reservation:
//
//	p:<nonce>  admitted, its question not yet stored (lapses after PendingHoldTTL)
//	q:<id>     question id, stored: it runs while id is in PendingKey
//	c:<id>     question id, cancelled: holds what its stopping tasks may still cost
//
// Each value is "<tokens> <charged> <expires>": the tokens reserved, those
// charged against them so far (a cancelled question's), and when the
// reservation lapses (Unix ms, Redis's clock; 0 while its question runs).
//
// Each operation is a WATCH transaction on the ledger (and the counters it
// decides on): read, decide in Go, write; retried when another process
// wrote first. No script is needed, so none is added to scripts.go.

// PendingHoldTTL is how long a reservation waits for its question to be
// stored: a request refused after admission (a bad body, a replayed
// Idempotency-Key) never stores one, and its reservation lapses.
const PendingHoldTTL = time.Minute

// DoneHoldGrace is how long a finished question's reservation outlives its
// charge's absence: a driver that died between recording the answer and
// charging it leaves one, which lapses.
const DoneHoldGrace = time.Minute

// ledgerTries bounds the retries of a ledger transaction that another
// process keeps overtaking.
const ledgerTries = 20

// TokenHold is one reservation of a tenant's ledger.
type TokenHold struct {
	Tokens, Charged int64
	// Expires is when it lapses (Unix ms; 0: never on its own).
	Expires int64
}

// Held is what the reservation still holds of the tenant's limit.
func (h TokenHold) Held() int64 { return max(0, h.Tokens-h.Charged) }

func (h TokenHold) String() string { return fmt.Sprintf("%d %d %d", h.Tokens, h.Charged, h.Expires) }

// parseHold reads a ledger value; a malformed one holds nothing and lapses.
func parseHold(v string) TokenHold {
	f := strings.Fields(v)
	if len(f) != 3 {
		return TokenHold{Expires: 1}
	}
	var n [3]int64
	for i, s := range f {
		n[i], _ = strconv.ParseInt(s, 10, 64)
	}
	return TokenHold{Tokens: n[0], Charged: n[1], Expires: n[2]}
}

// TokenLedger is what admission decides on: the tenant's tokens of the
// day and the day before, the questions they count, and what the live
// reservations hold.
type TokenLedger struct {
	Charged, Questions         int64
	PrevCharged, PrevQuestions int64
	Held                       int64
	Holds                      int
}

// ledger is one transaction's view of a tenant's reservations and the
// writes it decided.
type ledger struct {
	now   time.Time
	holds map[string]TokenHold
	put   map[string]TokenHold
	drop  map[string]bool
	also  []func(redis.Pipeliner)
}

func (l *ledger) set(field string, h TokenHold) {
	l.holds[field], l.put[field] = h, h
	delete(l.drop, field)
}

func (l *ledger) remove(field string) {
	delete(l.holds, field)
	delete(l.put, field)
	l.drop[field] = true
}

// held sums what the live reservations hold.
func (l *ledger) held() (int64, int) {
	var sum int64
	for _, h := range l.holds {
		sum += h.Held()
	}
	return sum, len(l.holds)
}

func (l *ledger) dirty() bool { return len(l.put)+len(l.drop)+len(l.also) > 0 }

// readLedger reads the ledger at key and drops the reservations that
// lapsed.
func readLedger(ctx context.Context, tx *redis.Tx, key string) (*ledger, error) {
	now, err := tx.Time(ctx).Result()
	if err != nil {
		return nil, err
	}
	all, err := tx.HGetAll(ctx, key).Result()
	if err != nil {
		return nil, err
	}
	l := &ledger{now: now, holds: map[string]TokenHold{}, put: map[string]TokenHold{}, drop: map[string]bool{}}
	for f, v := range all {
		h := parseHold(v)
		if h.Expires != 0 && h.Expires <= now.UnixMilli() {
			l.drop[f] = true
			continue
		}
		l.holds[f] = h
	}
	return l, nil
}

// updateLedger runs fn on tenant's ledger in a WATCH transaction over it
// and the keys in also, and writes what fn decided.
func updateLedger(ctx context.Context, c redis.UniversalClient, tenant string, fn func(tx *redis.Tx, l *ledger) error, also ...string) error {
	key := ReservedKey(tenant)
	for try := range ledgerTries {
		err := c.Watch(ctx, func(tx *redis.Tx) error {
			l, err := readLedger(ctx, tx, key)
			if err != nil {
				return err
			}
			if err := fn(tx, l); err != nil || !l.dirty() {
				return err
			}
			_, err = tx.TxPipelined(ctx, func(p redis.Pipeliner) error {
				for f := range l.drop {
					p.HDel(ctx, key, f)
				}
				for f, h := range l.put {
					p.HSet(ctx, key, f, h.String())
				}
				p.PExpire(ctx, key, TokensTTL)
				for _, w := range l.also {
					w(p)
				}
				return nil
			})
			return err
		}, append([]string{key}, also...)...)
		if !errors.Is(err, redis.TxFailedErr) {
			if err != nil {
				return fmt.Errorf("token reservations of tenant %s: %w", tenant, err)
			}
			return nil
		}
		// Overtaken: a burst of one tenant's requests spreads out instead
		// of colliding again.
		if err := sleep(ctx, time.Duration(mrand.Int64N(int64(try+1)*int64(time.Millisecond)))); err != nil {
			return fmt.Errorf("token reservations of tenant %s: %w", tenant, err)
		}
	}
	return fmt.Errorf("token reservations of tenant %s: too many concurrent updates", tenant)
}

// ReserveTokens shows decide tenant's ledger and, in the same transaction,
// reserves the tokens it returns (none when it returns 0 or an error, which
// is returned). The result is the reservation's field, "" if none.
func ReserveTokens(ctx context.Context, c redis.UniversalClient, tenant string, decide func(TokenLedger) (int64, error)) (string, error) {
	var field string
	var refused error
	err := updateLedger(ctx, c, tenant, func(tx *redis.Tx, l *ledger) error {
		field, refused = "", nil
		tokens, no, err := decideHold(ctx, tx, l, tenant, decide)
		if err != nil || no != nil || tokens == 0 {
			refused = no
			return err
		}
		field = "p:" + nonce()
		l.set(field, TokenHold{Tokens: tokens, Expires: l.now.Add(PendingHoldTTL).UnixMilli()})
		return nil
	}, dayCounters(tenant)[:2]...)
	if err != nil {
		return "", err
	}
	return field, refused
}

// dayCounters are the keys admission decides on: the tenant's tokens and
// questions of today and of yesterday.
func dayCounters(tenant string) []string {
	day := time.Now()
	prev := day.AddDate(0, 0, -1)
	return []string{TokensKey(tenant, day), TokenQuestionsKey(tenant, day), TokensKey(tenant, prev), TokenQuestionsKey(tenant, prev)}
}

// decideHold shows decide the ledger l and the day's counters, and returns
// the tokens it reserves (0: admitted, reserving none) or its refusal.
func decideHold(ctx context.Context, tx *redis.Tx, l *ledger, tenant string, decide func(TokenLedger) (int64, error)) (int64, error, error) {
	n, err := readCounters(ctx, tx, dayCounters(tenant))
	if err != nil {
		return 0, nil, err
	}
	view := TokenLedger{Charged: n[0], Questions: n[1], PrevCharged: n[2], PrevQuestions: n[3]}
	view.Held, view.Holds = l.held()
	tokens, refused := decide(view)
	if refused != nil {
		return 0, refused, nil
	}
	return max(0, tokens), nil, nil
}

// readCounters reads integer keys (missing: 0).
func readCounters(ctx context.Context, tx *redis.Tx, keys []string) ([]int64, error) {
	vals, err := tx.MGet(ctx, keys...).Result()
	if err != nil {
		return nil, err
	}
	out := make([]int64, len(keys))
	for i, v := range vals {
		s, _ := v.(string)
		out[i], _ = strconv.ParseInt(s, 10, 64)
	}
	return out, nil
}

// sleep waits d unless ctx ends first.
func sleep(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

func nonce() string {
	b := make([]byte, 8)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}

// ReleaseTokenHold drops a reservation ReserveTokens made (its request
// was refused after all).
func ReleaseTokenHold(ctx context.Context, c redis.UniversalClient, tenant, field string) error {
	if err := c.HDel(ctx, ReservedKey(tenant), field).Err(); err != nil {
		return fmt.Errorf("releasing token reservation %s of tenant %s: %w", field, tenant, err)
	}
	return nil
}

// StartTokenHold moves the admission reservation pending (ReserveTokens'
// field) to question id, once it is stored: the reservation then lasts
// while id is pending, however long it runs; it returns the tokens id
// holds. runs false (an answer from the cache) releases it instead.
//
// A question stored after its admission's reservation lapsed (storing
// took longer than PendingHoldTTL) reserves again, decide seeing the
// ledger as admission does, so it never runs uncapped; refused, decide's
// refusal is returned and id holds nothing.
func StartTokenHold(ctx context.Context, c redis.UniversalClient, tenant, id, pending string, runs bool, decide func(TokenLedger) (int64, error)) (int64, error) {
	var tokens int64
	var refused error
	err := updateLedger(ctx, c, tenant, func(tx *redis.Tx, l *ledger) error {
		tokens, refused = 0, nil
		h, ok := l.holds[pending]
		if ok {
			l.remove(pending)
		}
		if !runs {
			return nil
		}
		if !ok {
			t, no, err := decideHold(ctx, tx, l, tenant, decide)
			if err != nil || no != nil {
				refused = no
				return err
			}
			h = TokenHold{Tokens: t}
		}
		h.Expires = 0
		tokens = h.Tokens
		l.set("q:"+id, h)
		return nil
	}, dayCounters(tenant)[:2]...)
	if err != nil {
		return 0, err
	}
	return tokens, refused
}

// QuestionTokenHold returns the tokens question id of tenant reserved
// (its q: field, StartTokenHold): 0 when it holds no reservation (its
// tenant has no token limit, it was answered from the cache, or its
// admission's reservation lapsed before it was stored).
func QuestionTokenHold(ctx context.Context, c redis.UniversalClient, tenant, id string) (int64, error) {
	v, err := c.HGet(ctx, ReservedKey(tenant), "q:"+id).Result()
	if errors.Is(err, redis.Nil) {
		return 0, nil
	}
	if err != nil {
		return 0, fmt.Errorf("token reservation of question %s of tenant %s: %w", id, tenant, err)
	}
	return parseHold(v).Tokens, nil
}

// finishedHolds are the q: fields whose question has left PendingKey:
// answered or failed, and soon charged.
func finishedHolds(ctx context.Context, tx *redis.Tx, l *ledger) ([]string, error) {
	var fields, ids []string
	for f := range l.holds {
		if id, ok := strings.CutPrefix(f, "q:"); ok {
			fields, ids = append(fields, f), append(ids, id)
		}
	}
	if len(ids) == 0 {
		return nil, nil
	}
	scores, err := tx.ZMScore(ctx, PendingKey, ids...).Result()
	if err != nil {
		return nil, err
	}
	var done []string
	for i, s := range scores {
		if s == 0 { // not a member (a member's score is its creation, never 0)
			done = append(done, fields[i])
		}
	}
	return done, nil
}

// smallest is the field of fields holding the fewest tokens.
func (l *ledger) smallest(fields []string) string {
	best := ""
	for _, f := range fields {
		if best == "" || l.holds[f].Tokens < l.holds[best].Tokens || l.holds[f].Tokens == l.holds[best].Tokens && f < best {
			best = f
		}
	}
	return best
}

// ChargeTokens adds a finished question's tokens to tenant's day (and,
// when there are any, counts the question for the mean) and, in the same
// transaction, releases the reservation of one finished question. The
// charge does not name its question, so it releases the smallest
// reservation of a finished one (a q: field whose id left PendingKey):
// for the sum they are interchangeable, and taking the smallest leaves
// held at least what the questions still to charge reserved. Finished
// reservations found without a charge are given DoneHoldGrace to lapse.
func ChargeTokens(ctx context.Context, c redis.UniversalClient, tenant string, tokens int64) error {
	day := time.Now()
	tk, qk := TokensKey(tenant, day), TokenQuestionsKey(tenant, day)
	return updateLedger(ctx, c, tenant, func(tx *redis.Tx, l *ledger) error {
		l.also = nil
		done, err := finishedHolds(ctx, tx, l)
		if err != nil {
			return err
		}
		if f := l.smallest(done); f != "" {
			l.remove(f)
		}
		l.stampDone(done)
		if tokens > 0 {
			l.also = append(l.also, func(p redis.Pipeliner) {
				p.IncrBy(ctx, tk, tokens)
				p.PExpire(ctx, tk, TokensTTL)
				p.Incr(ctx, qk)
				p.PExpire(ctx, qk, TokensTTL)
			})
		}
		return nil
	})
}

// stampDone gives the finished reservations still held DoneHoldGrace to
// lapse, unless their charge comes first.
func (l *ledger) stampDone(done []string) {
	for _, f := range done {
		if h, ok := l.holds[f]; ok && h.Expires == 0 {
			h.Expires = l.now.Add(DoneHoldGrace).UnixMilli()
			l.set(f, h)
		}
	}
}

// SettleTokenHold reconciles cancelled question id's reservation with the
// tokens it has been charged so far (rdb.Charge's total): it holds what it
// reserved beyond them until window after its last charge, while its
// stopping tasks may still add costs. The first call takes over id's q:
// reservation or, if another question's charge released that one in its
// stead, the smallest finished one (see ChargeTokens).
func SettleTokenHold(ctx context.Context, c redis.UniversalClient, tenant, id string, charged int64, window time.Duration) error {
	return updateLedger(ctx, c, tenant, func(tx *redis.Tx, l *ledger) error {
		field := "c:" + id
		h, ok := l.holds[field]
		if !ok {
			from := "q:" + id
			if _, own := l.holds[from]; !own {
				done, err := finishedHolds(ctx, tx, l)
				if err != nil {
					return err
				}
				from = l.smallest(done)
			}
			if from == "" {
				return nil // admitted without a reservation (no limit then)
			}
			h = TokenHold{Tokens: l.holds[from].Tokens}
			l.remove(from)
		}
		h.Charged, h.Expires = max(h.Charged, charged), l.now.Add(window).UnixMilli()
		l.set(field, h)
		return nil
	})
}
