// Package rdb owns quorum's Redis: every key name (keys.go), every Lua
// script with the Go function that runs it (scripts.go), and the one lease
// (lease.go). Other packages keep their logic (what a value means, how it
// is encoded, when to write it) and ask rdb for the key and the atomic
// operation; none spells a "quorum:…" key or calls redis.NewScript (a test
// of this package checks it).
//
// Every key starts with Prefix ("quorum:"), which is also what the deployed
// ACL grants (~quorum:*). <run> is a run id, <ex> an example id, <agent> an
// agent's name (none holds ':', see queue.CheckToken). The lifetimes
// ("retired") are those of [RetireRun]: a run's keys live until the run is
// finished, then the state ones --retain (runstate.DefaultState, 7 days)
// and the answer ones --retain-answers (runstate.DefaultAnswers, 14 days).
//
//	key (after quorum:)               owner (writer)             holds                                     TTL / retention
//	run:<run>:manifest                internal/runtime/runstate       the run's manifest (JSON)                 none; retired: answers
//	run:<run>:final                   runstate                   hash example → final answer               none; retired: answers
//	run:<run>:meta                    runstate                   hash example → warehouse, published       none; retired: state
//	run:<run>:sessions                runstate (the coordinator) hash "count", "<n>" → a session's start,  none; retired: state
//	                                                             end, closed (JSON); rdb/sessions.go
//	run:<run>:cancelled               runstate (serve's cancel,  the reason                                CancelTTL (14 days); retired: ≤ state
//	                                  a run's token cap)
//	run:<run>:tokens                  runstate (the worker's     LLM tokens a run with a token cap         none; retired: state
//	                                  calls, SpendRunTokens)     (Manifest.MaxTokens) has used
//	run:<run>:trace:<ex>              runstate (pkg/trace)  list of the example's trace entries       none; retired: state
//	run:<run>:ex:<ex>:<agent>:<kind>  runstate                   kind: tasks, taken, done, ran, reissued,  none; retired: state
//	                                                             current, expect:<n>, round:<n>, decided:<n>,
//	                                                             state:<name>, once:<name>, join:<group>
//	run:<run>:ex:…:once:<name>:lock   runstate (Store.Once)      a Lease while one process computes        15 s, renewed
//	run:<run>:ex:…:checkpoint:<name>  runstate (checkpoint.go)   a long task's chain state (agent.Store    CheckpointTTL (24 h) from
//	                                                             checkpoints), or a blob reference to it   each save; dropped when done
//	run:<run>:ex:…:lease:<task>       worker (TaskLease)         a Lease: the worker running the task      TaskLeaseTTLFor(--redis-failover-time),
//	                                                                                                       at least 15 s; renewed, or taken
//	                                                                                                       again when a failover lost it
//	runkeys:<run>                     runstate (the write        set of the run's keys, which retirement,  none; retired: answers
//	                                  scripts of scripts.go)     deletion and listing read (never SCAN)
//	retired:<run>                     runstate (RetireRun)       hash state, answers → their expiry (ms)   answers retention
//	runs                              runstate (write scripts)   sorted set run → when its last key        none; members leave when
//	                                                             expires (+inf until retired)              deleted or expired
//	rounds                            runstate                   sorted set run|ex|agent|round → deadline  none; members leave when
//	                                                                                                       decided or retired
//	cache:<key>                       runstate.Cache             the agents' shared cache (agent.Cache)    CacheTTL (7 days) from a write
//	link:<key>                        agents/dbinfo              schema-linking answers (RedisLinkCache)   its TTL, default CacheTTL
//	schema:<key>:<digest>             internal/warehouse/schema       a live schema and its fingerprint         schema.Cache.TTL (24 h)
//	schema:<key>:<digest>:lock        warehouse/schema           a Lease while one process reads it        schema.Cache.LockTTL (2 min)
//	blob:sha256:<hex>                 internal/blob                   content-addressed payloads                blob.New's ttl, BlobTTL (14 days)
//	rl:<claim>                        internal/ratelimit              a claim's GCRA schedule (µs); claims:     until idle again, + 1 s
//	                                                             llm:<group>:rpm|tpm, wh:<name>:qps,
//	                                                             serve:<tenant>:req
//	rl:cooldown:<group>               ratelimit                  a pause after a provider's 429            the pause
//	rl:down:<group>                   ratelimit (route.go)       set while an LLM deployment is cooled     the cooldown
//	                                                             down after failures
//	rl:fails:<group>                  ratelimit (route.go)       a deployment's health failures in a row   1 min from the last
//	rl:warm:<hash>                    ratelimit (warm.go)        "pending" while the first call of a long  the call's warm-up lock,
//	                                                             shared prompt start runs; "warm" once     then llm.Config.WarmUpTTL
//	                                                             the provider has it cached
//	rl:sem:<name>                     ratelimit                  sorted set of slot leases token → expiry  twice the lease, renewed
//	rl:bytes:<run>                    ratelimit                  bytes a run scanned (ByteBudget)          BytesTTL (14 days)
//	rl:llm-limits                     ratelimit (limits.go;      hash group → an LLM quota set on a        none; cleared by quorum
//	                                  quorum limits set)         running cluster (JSON), over the config   limits clear
//	rl:llm-limits:log                 ratelimit (limits.go)      list of the changes, newest first         the last LimitsLogLen
//	rl:llm-learned:<group>            ratelimit (learn.go)       hash: the limits learned of the provider  LearnedTTL from its last
//	                                                             (rpm, tpm; header limits hrpm, htpm)      change
//	serve:q:<id>                      internal/app/serve                  a question and its answer (JSON)          serve's --retain, every write
//	serve:pending                     serve                      sorted set of unfinished questions        none; members leave at the end
//	serve:lease:<id>                  serve                      a Lease: the process driving it           10 s, renewed
//	serve:idem:<hash>                 serve                      Idempotency-Key → question id             serve's --retain
//	serve:cache:<tenant>:<hash>       serve                      the answer of a tenant's equal questions  serve's --cache-ttl (1 h)
//	serve:tokens:<tenant>:<yyyymmdd>  serve                      a tenant's tokens of the day              TokensTTL (48 h)
//	serve:money:<tenant>:<yyyymmdd>   serve                      a tenant's money of the day, questions    TokensTTL (48 h)
//	serve:tokq:<tenant>:<yyyymmdd>    serve                      questions the day's tokens count (mean)   TokensTTL (48 h)
//	serve:reserved:<tenant>           serve (tenantbudget.go)    token reservations of unfinished          TokensTTL from its last
//	                                                             questions, by question                    write
//	serve:verified:pairs:<scope>:     serve                      verified question–SQL pairs (scope:       serve's VerifiedTTL
//	  <dialect>:<db>                                             t:<tenant>, or shared)                    (--retain), capped 500
//	serve:verified:index:<scope>:     serve                      sorted set of those pairs by time         the same
//	  <dialect>:<db>
//	serve:verified:<dialect>:<db>     none now (an older serve)  the pairs every tenant shared before      none; deleted at serve's
//	                                                             pairs were per tenant; never read now     start (DeleteLegacyVerified)
//	serve:charged:<id>                serve                      the tokens a cancelled question was       TokensTTL (48 h)
//	                                                             charged
//	serve:charged:<id>:money          serve                      the money (millionths) it was charged     TokensTTL (48 h)
//	serve:settle                      serve                      sorted set of cancelled questions         none; members leave when
//	                                                             whose late costs are still to charge      settled
//	serve:idkey                       serve                      the secret question ids are signed with   none (shared by every process)
//
// The rate limiter's prefix is configurable (ratelimit.Config.Prefix, tests
// use their own); RateLimitPrefix is the default. dbinfo.RedisLinkCache's
// prefix is too (LinkPrefix).
package rdb

import (
	"strings"
	"time"
)

// Prefix starts every key quorum writes.
const Prefix = "quorum:"

// Runs: internal/runtime/runstate.

// runPrefix starts every key of every run.
const runPrefix = Prefix + "run:"

// RunKey is run's key named by parts: quorum:run:<run>:<parts…>.
func RunKey(run string, parts ...string) string {
	return runPrefix + run + ":" + strings.Join(parts, ":")
}

// ManifestKey holds run's manifest.
func ManifestKey(run string) string { return RunKey(run, "manifest") }

// FinalKey holds run's final answers by example.
func FinalKey(run string) string { return RunKey(run, "final") }

// MetaKey holds run's examples' meta.
func MetaKey(run string) string { return RunKey(run, "meta") }

// CancelledKey marks run cancelled; its value is the reason.
func CancelledKey(run string) string { return RunKey(run, "cancelled") }

// RunTokensKey counts the LLM tokens (prompt and completion) the answered
// calls of run have used, for a run with a token cap (runstate's
// Manifest.MaxTokens; SpendRunTokens).
func RunTokensKey(run string) string { return RunKey(run, "tokens") }

// TraceKey holds the trace entries of run's example (pkg/trace), in
// the order they were written.
func TraceKey(run, ex string) string { return RunKey(run, "trace", ex) }

// CancelTTL is how long a cancel mark lasts (a retired run's at most its
// state retention).
const CancelTTL = 14 * 24 * time.Hour

// ExampleKey is a key of one example's agent in run:
// quorum:run:<run>:ex:<ex>:<agent>:<parts…>.
func ExampleKey(run, ex, agent string, parts ...string) string {
	return RunKey(run, append([]string{"ex", ex, agent}, parts...)...)
}

// LockKey is the lease guarding the computation of key's value (Store.Once,
// the schema cache).
func LockKey(key string) string { return key + ":lock" }

// Checkpoints and task leases: internal/runtime/runstate (checkpoint.go)
// and internal/runtime/worker. Neither is in a run's key index: each
// lives by its TTL, so a run's retirement need not know them.

// CheckpointKey holds the chain state a long task of run's example and
// agent saved after its last step (agent.Store.SaveCheckpoint).
func CheckpointKey(run, ex, agent, task string) string {
	return ExampleKey(run, ex, agent, "checkpoint", task)
}

// CheckpointTTL is how long a checkpoint outlives its last save: a task
// redelivered later than this starts its chain again.
const CheckpointTTL = 24 * time.Hour

// TaskLeaseKey is the lease of the process running a task, taken before
// the task's work starts, so a redelivery beside a live holder (a NATS
// restart redelivers what is in flight) waits instead of running it twice.
func TaskLeaseKey(run, ex, agent, task string) string {
	return ExampleKey(run, ex, agent, "lease", task)
}

// TaskLeaseTTL is how long a task lease lasts without a renewal: a holder
// that died frees its task within it.
const TaskLeaseTTL = 15 * time.Second

// TaskLeaseTTLFor is the task lease for a Redis whose failover takes up
// to failover (Sentinel's down-after-milliseconds plus its failover
// time): renewed every third of it, a lease must outlast a failover
// begun just after a renewal, so it is at least twice the failover, and
// never under TaskLeaseTTL. A longer lease keeps a dead holder's task
// waiting longer, so it follows the failover the deployment configures.
func TaskLeaseTTLFor(failover time.Duration) time.Duration {
	return max(TaskLeaseTTL, 2*failover)
}

// RunIndexKey is the set of run's keys, kept by every script that writes
// one: retirement, deletion and description read it instead of scanning
// the keyspace.
func RunIndexKey(run string) string { return Prefix + "runkeys:" + run }

// RetiredKey marks a retired run: when its state and its answer keys expire
// (Unix ms). A key first written after the retirement gets that expiry from
// the script that writes it.
func RetiredKey(run string) string { return Prefix + "retired:" + run }

// RunsKey is the sorted set of runs with keys, scored by when the run's
// last key expires (+inf until it is retired).
const RunsKey = Prefix + "runs"

// RoundsKey is the sorted set of open rounds' deadlines.
const RoundsKey = Prefix + "rounds"

// CacheKey is key of the agents' cluster-wide cache (runstate.Cache).
func CacheKey(key string) string { return Prefix + "cache:" + key }

// CacheTTL is how long a cached value (runstate.Cache, and
// dbinfo.RedisLinkCache by default) lives after its last write: what is
// cached (schema-linking answers) is cheap to recompute, and a key per
// (database, table, question) must not pile up forever.
const CacheTTL = 7 * 24 * time.Hour

// LinkPrefix is dbinfo.RedisLinkCache's default prefix.
const LinkPrefix = Prefix + "link:"

// Schemas: internal/warehouse/schema.

// SchemaPrefix starts every key of the schema cache.
const SchemaPrefix = Prefix + "schema:"

// SchemaKey is the cached schema read for the caller's key (a warehouse
// name) with digest (of the dialect, database and options).
func SchemaKey(key, digest string) string { return SchemaPrefix + key + ":" + digest }

// Blobs: internal/blob.

// BlobPrefix starts every blob's key.
const BlobPrefix = Prefix + "blob:"

// BlobKey is the key of the blob with reference ref ("sha256:<hex>").
func BlobKey(ref string) string { return BlobPrefix + ref }

// BlobTTL is a blob's default lifetime; answers' result tables are blobs,
// so runstate.DefaultAnswers does not exceed it.
const BlobTTL = 14 * 24 * time.Hour

// Rate limits: internal/ratelimit. The names below are relative to the
// limiter's prefix (RateLimitPrefix by default).

// RateLimitPrefix is the limiter's default prefix.
const RateLimitPrefix = Prefix + "rl:"

// CooldownName pauses group's reservations.
func CooldownName(group string) string { return "cooldown:" + group }

// SemaphoreName is the sorted set of the semaphore's slot leases.
func SemaphoreName(name string) string { return "sem:" + name }

// BytesName counts the bytes run scanned.
func BytesName(run string) string { return "bytes:" + run }

// BytesTTL is how long a run's scanned bytes are counted.
const BytesTTL = 14 * 24 * time.Hour

// LLMRequestsName and LLMTokensName are an LLM endpoint and model's
// requests and tokens per minute (group names both).
func LLMRequestsName(group string) string { return "llm:" + group + ":rpm" }

// LLMTokensName: see LLMRequestsName.
func LLMTokensName(group string) string { return "llm:" + group + ":tpm" }

// LLMLimitsName holds the LLM quotas set on a running cluster (quorum
// limits set), by group; LLMLimitsLogName lists their changes.
const (
	LLMLimitsName    = "llm-limits"
	LLMLimitsLogName = "llm-limits:log"
	// LimitsLogLen is how many changes the log keeps.
	LimitsLogLen = 1000
)

// LLMLearnedName holds what the cluster learned of group's real limits
// (internal/ratelimit's learn.go).
func LLMLearnedName(group string) string { return "llm-learned:" + group }

// LearnedTTL is how long a learned limit outlives its last change: a
// provider's limits change, and what a quiet hour left is stale.
const LearnedTTL = time.Hour

// DeploymentDownName is set while an LLM deployment (group: endpoint and
// model) is cooled down after failures; DeploymentFailsName counts its
// health failures in a row.
func DeploymentDownName(group string) string { return "down:" + group }

// DeploymentFailsName: see DeploymentDownName.
func DeploymentFailsName(group string) string { return "fails:" + group }

// WarmName marks a prompt start (hash: its digest) being sent ahead to
// warm the provider's prompt cache, then warm.
func WarmName(hash string) string { return "warm:" + hash }

// WarehouseGroup names a warehouse's cooldown group and semaphore.
func WarehouseGroup(name string) string { return "wh:" + name }

// WarehouseQPSName is a warehouse's queries per second.
func WarehouseQPSName(name string) string { return WarehouseGroup(name) + ":qps" }

// TenantGroup names a serve tenant's cooldown group.
func TenantGroup(tenant string) string { return "serve:" + tenant }

// TenantRequestsName is a serve tenant's requests per minute.
func TenantRequestsName(tenant string) string { return TenantGroup(tenant) + ":req" }

// Questions: internal/app/serve.

const servePrefix = Prefix + "serve:"

// QuestionKey holds question id.
func QuestionKey(id string) string { return servePrefix + "q:" + id }

// PendingKey is the sorted set of unfinished questions by creation.
const PendingKey = servePrefix + "pending"

// QuestionLeaseKey is the lease of the process driving question id.
func QuestionLeaseKey(id string) string { return servePrefix + "lease:" + id }

// IdempotencyKey maps a tenant's Idempotency-Key (hashed) to a question.
func IdempotencyKey(hash string) string { return servePrefix + "idem:" + hash }

// AnswerCacheKey holds the answer of tenant's equal questions (hashed):
// per tenant, since an answer carries what its asker's question made (its
// SQL and rows) and paid for. An older serve's "cache:<hash>", shared by
// every tenant, is never read (a tenant name holds no ':', serve.ParseKeys)
// and ends with its TTL.
func AnswerCacheKey(tenant, hash string) string { return servePrefix + "cache:" + tenant + ":" + hash }

// TokensKey counts tenant's tokens on day (UTC).
func TokensKey(tenant string, day time.Time) string {
	return servePrefix + "tokens:" + tenant + ":" + day.UTC().Format("20060102")
}

// MoneyKey is a hash of tenant's spend on day (UTC): "micro", the money
// in millionths, and "n", the questions that spent it (their mean is the
// next question's estimate).
func MoneyKey(tenant string, day time.Time) string {
	return servePrefix + "money:" + tenant + ":" + day.UTC().Format("20060102")
}

// ChargedKey holds the tokens cancelled question id has been charged.
func ChargedKey(id string) string { return servePrefix + "charged:" + id }

// ChargedMoneyKey holds the money (millionths) cancelled question id has
// been charged; ChargedKey("*") matches it too.
func ChargedMoneyKey(id string) string { return ChargedKey(id) + ":money" }

// TokensTTL keeps a day's token count (and a question's charge) past the
// day's end.
const TokensTTL = 48 * time.Hour

// SettleKey is the sorted set of cancelled questions whose late costs are
// still to charge, by the end of their window.
const SettleKey = servePrefix + "settle"

// IDKey holds the secret question ids are signed with.
const IDKey = servePrefix + "idkey"

// HistoryKey is the sorted set of tenant's questions by creation (the
// question page's history).
func HistoryKey(tenant string) string { return servePrefix + "history:" + tenant }

// VerifiedKey is the hash of question–SQL pairs tenant's users verified on
// database db (its name and dialect), by normalised question: the examples
// offered to the tenant's later similar questions. An empty tenant names
// the pairs every tenant shares (serve's SharedVerifiedExamples, an
// operator's choice). Neither is LegacyVerifiedKey, the shared key of
// before pairs were kept per tenant.
func VerifiedKey(tenant, db, dialect string) string {
	return verifiedPrefix + "pairs:" + verifiedScope(tenant) + ":" + dialect + ":" + db
}

// verifiedPrefix starts every verified-examples key, current and legacy.
const verifiedPrefix = servePrefix + "verified:"

// LegacyVerifiedKey is where serve kept database db's verified pairs
// before they were per tenant: one hash every tenant read, without expiry
// or cap, its SQL never passed through the guard. Nothing reads or writes
// it now; serve's start deletes it (DeleteLegacyVerified).
func LegacyVerifiedKey(db, dialect string) string { return verifiedPrefix + dialect + ":" + db }

// isLegacyVerified reports whether key, under verifiedPrefix, is a
// LegacyVerifiedKey: the current keys' next part is "pairs" or "index",
// never a dialect's name.
func isLegacyVerified(key string) bool {
	rest, ok := strings.CutPrefix(key, verifiedPrefix)
	return ok && !strings.HasPrefix(rest, "pairs:") && !strings.HasPrefix(rest, "index:")
}

// VerifiedIndexKey is the sorted set of VerifiedKey's fields by when each
// was verified (Unix ms): what retrieval ranks, what expiry and the cap
// evict first.
func VerifiedIndexKey(tenant, db, dialect string) string {
	return verifiedPrefix + "index:" + verifiedScope(tenant) + ":" + dialect + ":" + db
}

// verifiedScope keeps a tenant's pairs apart from the shared ones: tenant
// names hold no ':' (serve.ParseKeys), so "t:<tenant>" is never "shared".
func verifiedScope(tenant string) string {
	if tenant == "" {
		return "shared"
	}
	return "t:" + tenant
}

// ReservedKey is the hash of tenant's token reservations: one field per
// question admitted and not yet charged in full (ReserveTokens). It keeps
// TokensTTL from its last write.
func ReservedKey(tenant string) string { return servePrefix + "reserved:" + tenant }

// TokenQuestionsKey counts the questions whose tokens TokensKey(tenant,
// day) holds: their mean is the next question's reservation. It keeps
// TokensTTL.
func TokenQuestionsKey(tenant string, day time.Time) string {
	return servePrefix + "tokq:" + tenant + ":" + day.UTC().Format("20060102")
}
