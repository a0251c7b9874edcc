package rdb

import (
	"context"
	"fmt"
	"math"
	"strconv"
	"time"

	"github.com/redis/go-redis/v9"
)

// Every Lua script of quorum is here, next to the function that runs it.
// Scripts name every key they touch in KEYS (the ACL checks them) and read
// the clock with TIME, so that processes agree whatever their clocks.

// ---- Compare-and-set: leases (lease.go) and owned keys ----

// deleteIfEqualsScript deletes KEYS[1] if it holds ARGV[1].
var deleteIfEqualsScript = redis.NewScript(`
if redis.call('GET', KEYS[1]) == ARGV[1] then return redis.call('DEL', KEYS[1]) end
return 0`)

// DeleteIfEquals deletes key if it holds value, and says whether it did:
// the release of a lease, or of any key a process set and may since have
// lost to another.
func DeleteIfEquals(ctx context.Context, c redis.Cmdable, key, value string) (bool, error) {
	n, err := deleteIfEqualsScript.Run(ctx, c, []string{key}, value).Int()
	return n == 1, err
}

// expireIfEqualsScript sets KEYS[1]'s expiry to ARGV[2] ms if it holds
// ARGV[1].
var expireIfEqualsScript = redis.NewScript(`
if redis.call('GET', KEYS[1]) == ARGV[1] then return redis.call('PEXPIRE', KEYS[1], ARGV[2]) end
return 0`)

// ExpireIfEquals makes key expire in ttl if it holds value, and says
// whether it did: the renewal of a lease.
func ExpireIfEquals(ctx context.Context, c redis.Cmdable, key, value string, ttl time.Duration) (bool, error) {
	n, err := expireIfEqualsScript.Run(ctx, c, []string{key}, value, ttl.Milliseconds()).Int()
	return n == 1, err
}

// takeOverScript sets KEYS[1] to ARGV[2] for ARGV[3] ms if it holds
// ARGV[1]: a lease taken from a holder known to be dead, and from no one
// else (the holder may have changed since it was read).
var takeOverScript = redis.NewScript(`
if redis.call('GET', KEYS[1]) == ARGV[1] then
  redis.call('SET', KEYS[1], ARGV[2], 'PX', ARGV[3])
  return 1
end
return 0`)

// TakeOver takes the lease from holder (a token read from its key, whose
// owner is known to be dead), if that is still who holds it, and says
// whether it did.
func (l *Lease) TakeOver(ctx context.Context, holder string) (bool, error) {
	n, err := takeOverScript.Run(ctx, l.c, []string{l.key}, holder, l.token, l.ttl.Milliseconds()).Int()
	return n == 1, err
}

// renewOrRetakeScript renews the lease KEYS[1] (token ARGV[1], ttl ARGV[2]
// ms) if it is still ARGV[1]'s; if the key is gone and ARGV[3] is not a
// member of the set KEYS[2], it takes it again (2).
var renewOrRetakeScript = redis.NewScript(`
local v = redis.call('GET', KEYS[1])
if v == ARGV[1] then return redis.call('PEXPIRE', KEYS[1], ARGV[2]) end
if not v and redis.call('SISMEMBER', KEYS[2], ARGV[3]) == 0 then
  redis.call('SET', KEYS[1], ARGV[1], 'PX', ARGV[2])
  return 2
end
return 0`)

// RenewOrRetake renews a lease as Renew does; when its key is gone (a
// Redis failover to a replica that had not seen it, or its TTL passed
// while Redis was away) and member is not in the set doneKey (the work it
// guards did not finish meanwhile), it takes the lease again, since no
// other holder exists. retaken says it did.
func RenewOrRetake(ctx context.Context, c redis.Cmdable, l *Lease, doneKey, member string) (ok, retaken bool, err error) {
	n, err := renewOrRetakeScript.Run(ctx, c, []string{l.key, doneKey}, l.token, l.ttl.Milliseconds(), member).Int()
	return n > 0, n == 2, err
}

// ---- Runs: internal/runtime/runstate ----
//
// Every write to a run's key goes through a script starting with
// trackLua: the key joins the run's index (RunIndexKey), a run's first key
// registers it in RunsKey, and a key written to a retired run (RetiredKey
// exists) gets the retirement's expiry at once, or keeps a sooner one. So
// a late write (a task that was still running at a cancel, a redelivered
// result) never leaves a key without an expiry, and retirement and
// deletion address the run's keys without scanning the keyspace.
//
// The run scripts' KEYS start with the index, the mark and the registry,
// and their ARGV with the run id; the operation's own keys and arguments
// follow (KEYS[4], ARGV[2] on).

const trackLua = `
local function track(key, answer)
  local at = redis.call('HGET', KEYS[2], answer and 'answers' or 'state')
  if redis.call('SADD', KEYS[1], key) == 1 and not at then
    redis.call('ZADD', KEYS[3], 'inf', ARGV[1])
  end
  if at then redis.call('PEXPIREAT', key, at, 'LT') end
end
`

// KeyKind is how long a run's key is kept once the run is retired.
type KeyKind bool

const (
	// StateKey is per-task state, kept for the state retention.
	StateKey KeyKind = false
	// AnswerKey (the manifest, the final answers) is kept for the
	// answers retention.
	AnswerKey KeyKind = true
)

func (k KeyKind) arg() string {
	if k == AnswerKey {
		return "1"
	}
	return "0"
}

func runScript(ctx context.Context, c redis.Cmdable, s *redis.Script, run string, keys []string, args ...any) *redis.Cmd {
	return s.Run(ctx, c, append([]string{RunIndexKey(run), RetiredKey(run), RunsKey}, keys...), append([]any{run}, args...)...)
}

var runCreateScript = redis.NewScript(trackLua + `
if redis.call('SET', KEYS[4], ARGV[3], 'NX') then
  track(KEYS[4], ARGV[2] == '1')
  return 1
end
return 0`)

// CreateRunKey sets run's key to value unless it exists (SET NX) and says
// whether it did.
func CreateRunKey(ctx context.Context, c redis.Cmdable, run, key string, kind KeyKind, value any) (bool, error) {
	n, err := runScript(ctx, c, runCreateScript, run, []string{key}, kind.arg(), value).Int()
	return n == 1, err
}

var runSetScript = redis.NewScript(trackLua + `
if tonumber(ARGV[4]) > 0 then
  redis.call('SET', KEYS[4], ARGV[3], 'PX', ARGV[4])
else
  redis.call('SET', KEYS[4], ARGV[3], 'KEEPTTL')
end
track(KEYS[4], ARGV[2] == '1')
return 1`)

// SetRunKey sets run's key to value. With ttl 0 the key keeps its expiry
// (KEEPTTL: an overwrite never makes a retired key permanent again);
// otherwise it expires in ttl, or sooner if the run is retired.
func SetRunKey(ctx context.Context, c redis.Cmdable, run, key string, kind KeyKind, value any, ttl time.Duration) error {
	return runScript(ctx, c, runSetScript, run, []string{key}, kind.arg(), value, ttl.Milliseconds()).Err()
}

var runHSetScript = redis.NewScript(trackLua + `
for i = 3, #ARGV, 2 do redis.call('HSET', KEYS[4], ARGV[i], ARGV[i + 1]) end
track(KEYS[4], ARGV[2] == '1')
return 1`)

// HSetRunKey sets fields of run's hash key (field, value, field, value…).
func HSetRunKey(ctx context.Context, c redis.Cmdable, run, key string, kind KeyKind, fieldValues ...any) error {
	if len(fieldValues) == 0 || len(fieldValues)%2 != 0 {
		return fmt.Errorf("hset %s: want field, value pairs, got %d values", key, len(fieldValues))
	}
	return runScript(ctx, c, runHSetScript, run, []string{key}, append([]any{kind.arg()}, fieldValues...)...).Err()
}

var runSAddScript = redis.NewScript(trackLua + `
for i = 2, #ARGV do redis.call('SADD', KEYS[4], ARGV[i]) end
track(KEYS[4], false)
return 1`)

// SAddRunKey adds members to run's set key (per-task state).
func SAddRunKey(ctx context.Context, c redis.Cmdable, run, key string, members ...any) error {
	if len(members) == 0 {
		return nil
	}
	return runScript(ctx, c, runSAddScript, run, []string{key}, members...).Err()
}

var runRPushScript = redis.NewScript(trackLua + `
for i = 2, #ARGV do redis.call('RPUSH', KEYS[4], ARGV[i]) end
track(KEYS[4], false)
return 1`)

// RPushRunKey appends values to run's list key (per-task state).
func RPushRunKey(ctx context.Context, c redis.Cmdable, run, key string, values ...any) error {
	if len(values) == 0 {
		return nil
	}
	return runScript(ctx, c, runRPushScript, run, []string{key}, values...).Err()
}

var runHIncrScript = redis.NewScript(trackLua + `
local n = redis.call('HINCRBY', KEYS[4], ARGV[2], ARGV[3])
track(KEYS[4], false)
return n`)

// HIncrRunKey adds by to field of run's hash key (per-task state) and
// returns the new value.
func HIncrRunKey(ctx context.Context, c redis.Cmdable, run, key, field string, by int64) (int64, error) {
	return runScript(ctx, c, runHIncrScript, run, []string{key}, field, by).Int64()
}

var runHSetOnceScript = redis.NewScript(trackLua + `
local added = redis.call('HSETNX', KEYS[4], ARGV[2], ARGV[3])
local n = redis.call('HLEN', KEYS[4])
track(KEYS[4], false)
return {added, n}`)

// HSetOnceRunKey sets field of run's hash key unless it is set (HSETNX),
// and returns whether it did and how many fields the hash has: a result
// or a join's part recorded once, however often it is delivered.
func HSetOnceRunKey(ctx context.Context, c redis.Cmdable, run, key string, field, value any) (added bool, n int, err error) {
	res, err := runScript(ctx, c, runHSetOnceScript, run, []string{key}, field, value).Slice()
	if err != nil {
		return false, 0, err
	}
	return res[0].(int64) == 1, int(res[1].(int64)), nil
}

var runOpenRoundScript = redis.NewScript(trackLua + `
redis.call('SET', KEYS[4], ARGV[2], 'KEEPTTL')
track(KEYS[4], false)
if #ARGV > 3 then
  for i = 4, #ARGV, 2 do redis.call('HSET', KEYS[5], ARGV[i], ARGV[i + 1]) end
  track(KEYS[5], false)
end
redis.call('SET', KEYS[6], ARGV[3], 'KEEPTTL')
track(KEYS[6], false)
return 1`)

// OpenRound records, at once, that a round awaits expect results
// (expectKey), its tasks (tasksKey: task id, envelope…) and that it is the
// example's current round (currentKey holds round).
func OpenRound(ctx context.Context, c redis.Cmdable, run, expectKey, tasksKey, currentKey string, expect, round int, tasks ...any) error {
	if len(tasks)%2 != 0 {
		return fmt.Errorf("open round %d: want task id, task pairs, got %d values", round, len(tasks))
	}
	args := append([]any{expect, round}, tasks...)
	return runScript(ctx, c, runOpenRoundScript, run, []string{expectKey, tasksKey, currentKey}, args...).Err()
}

var runProgressScript = redis.NewScript(trackLua + `
local done = 0
if ARGV[2] ~= '' then
  done = redis.call('SISMEMBER', KEYS[4], ARGV[2])
  redis.call('SADD', KEYS[5], ARGV[2])
  track(KEYS[5], false)
end
redis.call('ZADD', KEYS[6], 'XX', ARGV[3], ARGV[4])
return done`)

// Progress records, in one call, that a task (taskID, unless "") was taken
// (takenKey) and moves the round's deadline in RoundsKey (member) to
// deadline if the round is open; it reports whether the task is in doneKey.
func Progress(ctx context.Context, c redis.Cmdable, run, doneKey, takenKey, taskID, member string, deadline time.Time) (done bool, err error) {
	n, err := runScript(ctx, c, runProgressScript, run, []string{doneKey, takenKey, RoundsKey}, taskID, deadline.UnixMilli(), member).Int()
	return n == 1, err
}

// runSpendTokensScript adds ARGV[2] tokens to a run's count (KEYS[4]) and,
// once the count reaches ARGV[3], marks the run cancelled (KEYS[5]: ARGV[4]
// for ARGV[5] ms) unless it is marked already. Returns {count, reached}.
var runSpendTokensScript = redis.NewScript(trackLua + `
local n = redis.call('INCRBY', KEYS[4], ARGV[2])
track(KEYS[4], false)
if n < tonumber(ARGV[3]) then return {n, 0} end
if redis.call('SET', KEYS[5], ARGV[4], 'NX', 'PX', ARGV[5]) then track(KEYS[5], false) end
return {n, 1}`)

// SpendRunTokens adds tokens to what run's LLM calls have used
// (RunTokensKey) and reports the count and whether it has reached limit
// (> 0). The step that reaches it also marks the run cancelled
// (CancelledKey, CancelTTL) with reason, unless a cancel marked it first
// (its reason stays): no call can see the count at its cap while the run
// is not yet stopped, so a check of the mark before a call (the other
// tasks of the run) sees what the count decided.
func SpendRunTokens(ctx context.Context, c redis.Cmdable, run string, tokens, limit int64, reason string) (count int64, reached bool, err error) {
	if limit <= 0 {
		return 0, false, fmt.Errorf("token count of run %s: limit %d, want > 0", run, limit)
	}
	res, err := runScript(ctx, c, runSpendTokensScript, run, []string{RunTokensKey(run), CancelledKey(run)},
		tokens, limit, reason, CancelTTL.Milliseconds()).Int64Slice()
	if err != nil {
		return 0, false, fmt.Errorf("token count of run %s: %w", run, err)
	}
	return res[0], res[1] == 1, nil
}

var retireRunScript = redis.NewScript(`
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local state, answers = now + tonumber(ARGV[2]), now + tonumber(ARGV[3])
local prev = redis.call('HMGET', KEYS[2], 'state', 'answers')
if prev[1] and tonumber(prev[1]) < state then state = tonumber(prev[1]) end
if prev[2] and tonumber(prev[2]) < answers then answers = tonumber(prev[2]) end
redis.call('HSET', KEYS[2], 'state', string.format('%.0f', state), 'answers', string.format('%.0f', answers))
redis.call('PEXPIREAT', KEYS[2], string.format('%.0f', answers))
redis.call('PEXPIREAT', KEYS[1], string.format('%.0f', answers), 'LT')
redis.call('ZADD', KEYS[3], string.format('%.0f', answers), ARGV[1])
return {string.format('%.0f', state), string.format('%.0f', answers)}`)

// RetireRun marks run retired: its state keys are to expire in state and
// its answer keys in answers (an earlier retirement's sooner times stay).
// From now on every write to the run gives its key that expiry; the keys
// written before are the index's (RunIndexKey), which the caller expires
// with ExpireAt. It returns the two times, in Redis's clock.
func RetireRun(ctx context.Context, c redis.Cmdable, run string, state, answers time.Duration) (stateAt, answersAt time.Time, err error) {
	res, err := retireRunScript.Run(ctx, c, []string{RunIndexKey(run), RetiredKey(run), RunsKey}, run, state.Milliseconds(), answers.Milliseconds()).StringSlice()
	if err != nil {
		return time.Time{}, time.Time{}, err
	}
	ms := func(s string) time.Time { v, _ := strconv.ParseInt(s, 10, 64); return time.UnixMilli(v) }
	return ms(res[0]), ms(res[1]), nil
}

// ExpireAt makes each key expire at its time, unless it expires sooner
// (PEXPIREAT … LT), in one round trip; keys and at are parallel.
func ExpireAt(ctx context.Context, c redis.Cmdable, keys []string, at []time.Time) error {
	if len(keys) != len(at) {
		return fmt.Errorf("expire: %d keys, %d times", len(keys), len(at))
	}
	if len(keys) == 0 {
		return nil
	}
	pipe := c.Pipeline()
	for i, k := range keys {
		pipe.Do(ctx, "pexpireat", k, at[i].UnixMilli(), "lt")
	}
	_, err := pipe.Exec(ctx)
	return err
}

// ForgetRun removes run's index, its retirement mark and its registration,
// once its keys are deleted.
func ForgetRun(ctx context.Context, c redis.Cmdable, run string) error {
	pipe := c.TxPipeline()
	pipe.Unlink(ctx, RunIndexKey(run), RetiredKey(run))
	pipe.ZRem(ctx, RunsKey, run)
	_, err := pipe.Exec(ctx)
	return err
}

// ---- Questions: internal/app/serve ----

// chargeScript raises what a question has been charged (KEYS[1]) to
// ARGV[1] tokens, adding the difference to the tenant's day (KEYS[2]), and
// its money charged (KEYS[3], millionths) to ARGV[3], adding the difference
// to the day's money (KEYS[4], "micro"; "n" counts the question once): run
// twice, or by two processes at once, it charges once.
var chargeScript = redis.NewScript(`
local prev = tonumber(redis.call('GET', KEYS[1]) or '0')
local now = tonumber(ARGV[1])
if now > prev then
  redis.call('SET', KEYS[1], now, 'PX', ARGV[2])
  redis.call('INCRBY', KEYS[2], now - prev)
  redis.call('PEXPIRE', KEYS[2], ARGV[2])
end
local mprev = tonumber(redis.call('GET', KEYS[3]) or '0')
local mnow = tonumber(ARGV[3])
if mnow > mprev then
  redis.call('SET', KEYS[3], mnow, 'PX', ARGV[2])
  redis.call('HINCRBY', KEYS[4], 'micro', mnow - mprev)
  if mprev == 0 then redis.call('HINCRBY', KEYS[4], 'n', 1) end
  redis.call('PEXPIRE', KEYS[4], ARGV[2])
end
return now - prev`)

// Charge brings what question id has been charged up to tokens and money
// (ChargedKey, ChargedMoneyKey), adding the differences to tenant's tokens
// and money of the day (TokensKey, MoneyKey); all keep TokensTTL. It
// returns the tokens added.
func Charge(ctx context.Context, c redis.Cmdable, tenant, id string, tokens int, money float64) (int64, error) {
	now := time.Now()
	return chargeScript.Run(ctx, c, []string{ChargedKey(id), TokensKey(tenant, now), ChargedMoneyKey(id), MoneyKey(tenant, now)},
		tokens, TokensTTL.Milliseconds(), int64(math.Round(money*1e6))).Int64()
}

// ---- Rate limits: internal/ratelimit ----

// reserveScript admits every claim together now, or none of them and says
// how long until they would all fit: nothing is booked for later, so a
// refund (a token estimate reconciled after a call) helps whoever asks
// next instead of being lost to callers already scheduled. A claim larger
// than its burst fits when its key is idle. A cooldown key (the last key,
// set after a provider 429) defers everything. Returns {admitted, wait_us}.
var reserveScript = redis.NewScript(`
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000000 + tonumber(t[2])
local cd = redis.call('PTTL', KEYS[#KEYS])
if cd > 0 then return {0, cd * 1000} end
local n = #KEYS - 1
local wait = 0
local tats = {}
for i = 1, n do
  local em = tonumber(ARGV[(i-1)*3 + 1])
  local tol = tonumber(ARGV[(i-1)*3 + 2])
  local units = tonumber(ARGV[(i-1)*3 + 3])
  if em * units > tol then tol = em * units end
  local tat = tonumber(redis.call('GET', KEYS[i]) or now)
  if tat < now then tat = now end
  tats[i] = tat
  local w = tat + em * units - tol - now
  if w > wait then wait = w end
end
if wait > 0 then return {0, string.format('%.0f', wait)} end
for i = 1, n do
  local em = tonumber(ARGV[(i-1)*3 + 1])
  local units = tonumber(ARGV[(i-1)*3 + 3])
  local newtat = tats[i] + em * units
  local ttl = math.ceil((newtat - now) / 1000) + 1000
  redis.call('SET', KEYS[i], string.format('%.0f', newtat), 'PX', ttl)
end
return {1, '0'}
`)

// GCRAClaim is one claim of Reserve: units on Key, each occupying
// EmissionMicros of its schedule, ToleranceMicros of which may be taken
// at once.
type GCRAClaim struct {
	Key                             string
	EmissionMicros, ToleranceMicros float64
	Units                           float64
}

// Reserve admits the claims together now, or none and returns how long
// until they would all fit (the cooldown's remainder while cooldownKey is
// set).
func Reserve(ctx context.Context, c redis.Cmdable, cooldownKey string, claims []GCRAClaim) (admitted bool, wait time.Duration, err error) {
	keys := make([]string, 0, len(claims)+1)
	args := make([]any, 0, 3*len(claims))
	for _, cl := range claims {
		keys = append(keys, cl.Key)
		args = append(args, cl.EmissionMicros, cl.ToleranceMicros, cl.Units)
	}
	keys = append(keys, cooldownKey)
	res, err := reserveScript.Run(ctx, c, keys, args...).Slice()
	if err != nil {
		return false, 0, err
	}
	ok, _ := res[0].(int64)
	var micros float64
	switch v := res[1].(type) {
	case int64:
		micros = float64(v)
	case string:
		micros, _ = strconv.ParseFloat(v, 64)
	}
	return ok == 1, time.Duration(micros) * time.Microsecond, nil
}

// adjustScript moves a key's schedule by units (negative refunds), never
// before now.
var adjustScript = redis.NewScript(`
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000000 + tonumber(t[2])
local tat = tonumber(redis.call('GET', KEYS[1]) or now)
if tat < now then tat = now end
tat = tat + tonumber(ARGV[1]) * tonumber(ARGV[2])
if tat <= now then redis.call('DEL', KEYS[1]) return 0 end
redis.call('SET', KEYS[1], string.format('%.0f', tat), 'PX', math.ceil((tat - now) / 1000) + 1000)
return 1
`)

// Adjust moves key's GCRA schedule by units of emissionMicros each
// (negative: a refund), never before now.
func Adjust(ctx context.Context, c redis.Cmdable, key string, emissionMicros, units float64) error {
	return adjustScript.Run(ctx, c, []string{key}, emissionMicros, units).Err()
}

// reserveAnyScript admits a call on one of several candidates (an LLM
// model's deployments), each a set of claims as reserveScript takes them:
// candidates cooled down (their down key set) are skipped; among those
// that admit the call now, the lowest priority, then the most headroom
// (the smallest share of a burst left after the claim, times the weight)
// takes it. KEYS per candidate: cooldown, down, then its claims' keys.
// ARGV: the number of candidates, then per candidate its number of
// claims, weight and priority, then per claim emission, tolerance and
// units. Returns {index (1-based; 0: none admits now, -1: all down),
// wait_us until the first would}.
var reserveAnyScript = redis.NewScript(`
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000000 + tonumber(t[2])
local nc = tonumber(ARGV[1])
local ki, ai = 1, 2
local best, bestPri, bestScore, bestClaims = 0, 0, 0, nil
local minWait = -1
local up = false
for c = 1, nc do
  local cdKey, downKey = KEYS[ki], KEYS[ki + 1]
  ki = ki + 2
  local n, weight, pri = tonumber(ARGV[ai]), tonumber(ARGV[ai + 1]), tonumber(ARGV[ai + 2])
  ai = ai + 3
  local claims = {}
  for j = 1, n do
    claims[j] = {key = KEYS[ki], em = tonumber(ARGV[ai]), tol = tonumber(ARGV[ai + 1]), units = tonumber(ARGV[ai + 2])}
    ki = ki + 1
    ai = ai + 3
  end
  if redis.call('EXISTS', downKey) == 0 then
    up = true
    local wait = 0
    local cd = redis.call('PTTL', cdKey)
    if cd > 0 then wait = cd * 1000 end
    local head = 1
    for _, cl in ipairs(claims) do
      if cl.em * cl.units > cl.tol then cl.tol = cl.em * cl.units end
      local tat = tonumber(redis.call('GET', cl.key) or now)
      if tat < now then tat = now end
      cl.tat = tat
      local w = tat + cl.em * cl.units - cl.tol - now
      if w > wait then wait = w end
      local h = (cl.tol - (tat + cl.em * cl.units - now)) / cl.tol
      if h < head then head = h end
    end
    if wait <= 0 then
      local score = head * weight
      if best == 0 or pri < bestPri or (pri == bestPri and score > bestScore) then
        best, bestPri, bestScore, bestClaims = c, pri, score, claims
      end
    elseif minWait < 0 or wait < minWait then
      minWait = wait
    end
  end
end
if best > 0 then
  for _, cl in ipairs(bestClaims) do
    local newtat = cl.tat + cl.em * cl.units
    redis.call('SET', cl.key, string.format('%.0f', newtat), 'PX', math.ceil((newtat - now) / 1000) + 1000)
  end
  return {best, '0'}
end
if not up then return {-1, '0'} end
return {0, string.format('%.0f', minWait)}
`)

// RouteCandidate is one candidate of ReserveAny: its claims, its
// cooldown and down keys, and how it ranks.
type RouteCandidate struct {
	CooldownKey, DownKey string
	Claims               []GCRAClaim
	Weight               float64
	Priority             int
}

// ReserveAny admits the claims of one candidate now and returns its index,
// or -1 and how long until one would fit; allDown: every candidate is
// cooled down.
func ReserveAny(ctx context.Context, c redis.Cmdable, cands []RouteCandidate) (index int, wait time.Duration, allDown bool, err error) {
	var keys []string
	args := []any{len(cands)}
	for _, cd := range cands {
		keys = append(keys, cd.CooldownKey, cd.DownKey)
		args = append(args, len(cd.Claims), cd.Weight, cd.Priority)
		for _, cl := range cd.Claims {
			keys = append(keys, cl.Key)
			args = append(args, cl.EmissionMicros, cl.ToleranceMicros, cl.Units)
		}
	}
	res, err := reserveAnyScript.Run(ctx, c, keys, args...).Slice()
	if err != nil {
		return -1, 0, false, err
	}
	i, _ := res[0].(int64)
	var micros float64
	if s, ok := res[1].(string); ok {
		micros, _ = strconv.ParseFloat(s, 64)
	}
	switch {
	case i > 0:
		return int(i) - 1, 0, false, nil
	case i < 0:
		return -1, 0, true, nil
	}
	return -1, time.Duration(micros) * time.Microsecond, false, nil
}

// deploymentFailedScript counts a health failure of a deployment
// (KEYS[1], in a row within ARGV[2] ms) unless it is cooled down already
// (KEYS[2]); the ARGV[1]-th cools it down for ARGV[3] ms and leaves the
// count one short, so the probe after the cooldown cools it again if it
// fails. Returns 1 when this failure cooled it down.
var deploymentFailedScript = redis.NewScript(`
if redis.call('EXISTS', KEYS[2]) == 1 then return 0 end
local n = redis.call('INCR', KEYS[1])
redis.call('PEXPIRE', KEYS[1], ARGV[2])
if n < tonumber(ARGV[1]) then return 0 end
redis.call('SET', KEYS[2], '1', 'PX', ARGV[3])
redis.call('SET', KEYS[1], tonumber(ARGV[1]) - 1, 'PX', tonumber(ARGV[3]) + tonumber(ARGV[2]))
return 1
`)

// DeploymentFailed counts a deployment's health failure; true when it
// cooled the deployment down (downKey) for cooldown.
func DeploymentFailed(ctx context.Context, c redis.Cmdable, failsKey, downKey string, failures int, window, cooldown time.Duration) (bool, error) {
	n, err := deploymentFailedScript.Run(ctx, c, []string{failsKey, downKey}, failures, window.Milliseconds(), cooldown.Milliseconds()).Int()
	return n == 1, err
}

// cooldownScript extends (never shortens) a pause.
var cooldownScript = redis.NewScript(`
local cur = redis.call('PTTL', KEYS[1])
if cur < tonumber(ARGV[1]) then redis.call('SET', KEYS[1], '1', 'PX', ARGV[1]) end
return 1
`)

// Cooldown makes key last at least d (a longer pause in place is kept).
func Cooldown(ctx context.Context, c redis.Cmdable, key string, d time.Duration) error {
	return cooldownScript.Run(ctx, c, []string{key}, d.Milliseconds()).Err()
}

var acquireSlotScript = redis.NewScript(`
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
redis.call('ZREMRANGEBYSCORE', KEYS[1], '-inf', now)
if redis.call('ZCARD', KEYS[1]) < tonumber(ARGV[1]) then
  redis.call('ZADD', KEYS[1], now + tonumber(ARGV[2]), ARGV[3])
  redis.call('PEXPIRE', KEYS[1], tonumber(ARGV[2]) * 2)
  return {1, 0}
end
local first = redis.call('ZRANGE', KEYS[1], 0, 0, 'WITHSCORES')
return {0, tonumber(first[2]) - now}
`)

// AcquireSlot takes a slot of the semaphore key (a sorted set of leases
// scored by expiry) for token, for lease, if fewer than capacity are held;
// otherwise it returns how long until the first lease expires.
func AcquireSlot(ctx context.Context, c redis.Cmdable, key string, capacity int, lease time.Duration, token string) (ok bool, untilExpiry time.Duration, err error) {
	res, err := acquireSlotScript.Run(ctx, c, []string{key}, capacity, lease.Milliseconds(), token).Slice()
	if err != nil {
		return false, 0, err
	}
	got, _ := res[0].(int64)
	ms, _ := res[1].(int64)
	return got == 1, time.Duration(ms) * time.Millisecond, nil
}

var renewSlotScript = redis.NewScript(`
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local s = redis.call('ZSCORE', KEYS[1], ARGV[2])
if not s or tonumber(s) < now then redis.call('ZREM', KEYS[1], ARGV[2]) return 0 end
redis.call('ZADD', KEYS[1], now + tonumber(ARGV[1]), ARGV[2])
redis.call('PEXPIRE', KEYS[1], tonumber(ARGV[1]) * 2)
return 1
`)

// RenewSlot extends token's slot of the semaphore key by lease; false when
// the slot had expired (it is dropped).
func RenewSlot(ctx context.Context, c redis.Cmdable, key string, lease time.Duration, token string) (bool, error) {
	n, err := renewSlotScript.Run(ctx, c, []string{key}, lease.Milliseconds(), token).Int()
	return n == 1, err
}

var spendScript = redis.NewScript(`
local cur = redis.call('INCRBY', KEYS[1], ARGV[1])
if tonumber(ARGV[2]) > 0 and cur > tonumber(ARGV[2]) then
  redis.call('DECRBY', KEYS[1], ARGV[1])
  return {0, cur - tonumber(ARGV[1])}
end
redis.call('PEXPIRE', KEYS[1], ARGV[3])
return {1, cur}
`)

// Spend adds n to the counter key unless that would exceed limit (0: no
// limit); it returns whether it did and the count (before a refusal,
// after an addition). The counter keeps BytesTTL.
func Spend(ctx context.Context, c redis.Cmdable, key string, n, limit int64) (ok bool, count int64, err error) {
	res, err := spendScript.Run(ctx, c, []string{key}, n, limit, BytesTTL.Milliseconds()).Slice()
	if err != nil {
		return false, 0, err
	}
	got, _ := res[0].(int64)
	count, _ = res[1].(int64)
	return got == 1, count, nil
}

// warmTakeScript returns a warm-up mark's state, taking the lead (a
// "pending" mark for ARGV[1] ms) when there is none.
var warmTakeScript = redis.NewScript(`
local v = redis.call('GET', KEYS[1])
if v then return v end
redis.call('SET', KEYS[1], 'pending', 'PX', ARGV[1])
return 'lead'
`)

// Warm states of a prompt start's mark (WarmTake).
const (
	WarmLead    = "lead"    // this caller sends first
	WarmPending = "pending" // another caller is sending first
	WarmReady   = "warm"    // the provider has it cached
)

// WarmTake reads key's warm-up state; with none, the caller leads and key
// is pending for lock (a lead that dies frees it then).
func WarmTake(ctx context.Context, c redis.Cmdable, key string, lock time.Duration) (string, error) {
	return warmTakeScript.Run(ctx, c, []string{key}, max(lock.Milliseconds(), 1)).Text()
}

// ---- Learned LLM limits: internal/ratelimit (learn.go) ----

// learnDownScript cuts a learned limit (the hash KEYS[1], field ARGV[1]:
// rpm or tpm) to ARGV[2] (the rate in force) times ARGV[3], no lower than
// ARGV[4], unless it was cut less than ARGV[5] ms ago: the calls in flight
// when the provider first answered 429 were sent at the old rate, and
// their 429s say nothing new. ARGV[6] is the additive step (per second)
// kept from the first cut. Returns the new limit, or -1 (held off).
var learnDownScript = redis.NewScript(`
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local f = ARGV[1]
local dec = tonumber(redis.call('HGET', KEYS[1], 'dec:' .. f) or '0')
if now - dec < tonumber(ARGV[5]) then return '-1' end
local new = math.max(tonumber(ARGV[4]), tonumber(ARGV[2]) * tonumber(ARGV[3]))
redis.call('HSET', KEYS[1], f, string.format('%.3f', new), 'dec:' .. f, now, 'up:' .. f, now)
if redis.call('HEXISTS', KEYS[1], 'step:' .. f) == 0 then
  redis.call('HSET', KEYS[1], 'step:' .. f, ARGV[6])
end
redis.call('PEXPIRE', KEYS[1], ARGV[7])
return string.format('%.3f', new)
`)

// learnUpScript raises a learned limit (KEYS[1], field ARGV[1]) by its
// step per second since it last moved (at most ARGV[3] ms' worth); at the
// ceiling ARGV[2] (> 0) it is dropped, the ceiling trusted again.
// Returns the new limit (0: none learned).
var learnUpScript = redis.NewScript(`
local f = ARGV[1]
local cur = tonumber(redis.call('HGET', KEYS[1], f) or '0')
if cur <= 0 then return '0' end
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local up = tonumber(redis.call('HGET', KEYS[1], 'up:' .. f) or now)
local dt = math.min(now - up, tonumber(ARGV[3]))
if dt <= 0 then return string.format('%.3f', cur) end
local step = tonumber(redis.call('HGET', KEYS[1], 'step:' .. f) or '0')
local new = cur + step * dt / 1000
local ceil = tonumber(ARGV[2])
if ceil > 0 and new >= ceil then
  redis.call('HDEL', KEYS[1], f, 'up:' .. f, 'step:' .. f)
  return '0'
end
redis.call('HSET', KEYS[1], f, string.format('%.3f', new), 'up:' .. f, now)
redis.call('PEXPIRE', KEYS[1], ARGV[4])
return string.format('%.3f', new)
`)

// LearnDown cuts the learned limit field (rpm or tpm) of key to
// current×factor (at least floor), unless it was cut within holdOff;
// step is the additive increase per second LearnUp applies after it.
// It returns the new limit, and false when held off.
func LearnDown(ctx context.Context, c redis.Cmdable, key, field string, current, factor, floor float64, holdOff time.Duration, step float64) (float64, bool, error) {
	v, err := learnDownScript.Run(ctx, c, []string{key}, field, current, factor, floor, holdOff.Milliseconds(), step, LearnedTTL.Milliseconds()).Text()
	if err != nil {
		return 0, false, err
	}
	f, _ := strconv.ParseFloat(v, 64)
	return f, f >= 0, nil
}

// LearnUp raises the learned limit field of key by its step per second
// since it last moved (at most maxStep's worth of seconds); reaching
// ceiling (> 0) drops it. It returns the new limit, 0 when none is learned.
func LearnUp(ctx context.Context, c redis.Cmdable, key, field string, ceiling float64, maxStep time.Duration) (float64, error) {
	v, err := learnUpScript.Run(ctx, c, []string{key}, field, ceiling, maxStep.Milliseconds(), LearnedTTL.Milliseconds()).Text()
	if err != nil {
		return 0, err
	}
	f, _ := strconv.ParseFloat(v, 64)
	return f, nil
}

// LearnedLimits are a group's learned limits (0: none).
type LearnedLimits struct {
	// RPM and TPM are what 429s taught (AIMD); HeaderRPM and HeaderTPM
	// what the provider's headers state.
	RPM, TPM, HeaderRPM, HeaderTPM float64
}

// ReadLearned reads the learned limits at key.
func ReadLearned(ctx context.Context, c redis.Cmdable, key string) (LearnedLimits, error) {
	vs, err := c.HMGet(ctx, key, "rpm", "tpm", "hrpm", "htpm").Result()
	if err != nil {
		return LearnedLimits{}, err
	}
	f := make([]float64, len(vs))
	for i, v := range vs {
		if s, ok := v.(string); ok {
			f[i], _ = strconv.ParseFloat(s, 64)
		}
	}
	return LearnedLimits{RPM: f[0], TPM: f[1], HeaderRPM: f[2], HeaderTPM: f[3]}, nil
}

// setStatedScript records the limits a provider's headers state (ARGV[1]
// rpm, ARGV[2] tpm; 0 keeps what is there). ARGV[4] = 1 starts a cut's
// hold-off on requests: the stated limit just lowered the rate, and the
// 429s of calls sent before say nothing new.
var setStatedScript = redis.NewScript(`
if tonumber(ARGV[1]) > 0 then redis.call('HSET', KEYS[1], 'hrpm', ARGV[1]) end
if tonumber(ARGV[2]) > 0 then redis.call('HSET', KEYS[1], 'htpm', ARGV[2]) end
if ARGV[4] == '1' then
  local t = redis.call('TIME')
  redis.call('HSET', KEYS[1], 'dec:rpm', tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000))
end
redis.call('PEXPIRE', KEYS[1], ARGV[3])
return 1
`)

// SetHeaderLimits records the limits a provider's headers state (0: keep
// what is there); lowered says they lower the rate in force, which starts
// a cut's hold-off (LearnDown).
func SetHeaderLimits(ctx context.Context, c redis.Cmdable, key string, rpm, tpm float64, lowered bool) error {
	if rpm <= 0 && tpm <= 0 {
		return nil
	}
	low := 0
	if lowered {
		low = 1
	}
	return setStatedScript.Run(ctx, c, []string{key}, strconv.FormatFloat(rpm, 'f', -1, 64), strconv.FormatFloat(tpm, 'f', -1, 64), LearnedTTL.Milliseconds(), low).Err()
}
