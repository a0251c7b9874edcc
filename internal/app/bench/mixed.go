package bench

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/quorumsql/quorum/internal/app/serve"
	"github.com/quorumsql/quorum/internal/runtime/coordinator"
	"github.com/quorumsql/quorum/internal/service"
	"github.com/quorumsql/quorum/pkg/llmsim"
	"github.com/quorumsql/quorum/pkg/outputs"
)

// MixedScenario is the mixed benchmark: questions asked through the
// question API (internal/app/serve) on an idle cluster, then the same questions
// while a batch run of the scenario's examples saturates the same cluster
// and LLM quota.
type MixedScenario struct {
	// Scenario is the batch run (dataset, examples, votes), the provider
	// (its limits are on: the limiter shares the same quota) and the
	// cluster; its scaling fields are not used.
	Scenario
	// Questions are asked in each phase, one every IntervalMS, each with
	// QuestionVotes candidates and the answer cache off.
	Questions     int `json:"questions"`
	QuestionVotes int `json:"question_votes"`
	IntervalMS    int `json:"interval_ms"`
	// UnderWayTimeoutMS bounds the wait, once the batch started, for its
	// tasks to fill every generator slot before the questions are asked
	// (default 60s; they are asked anyway after it).
	UnderWayTimeoutMS int `json:"under_way_timeout_ms,omitempty"`
}

// StandardMixed is `quorum bench --mixed`'s scenario: the demo dataset's
// 44 examples x 8 candidates on a small cluster (2 generator workers x 8
// tasks, 1 explorer worker x 8) against a provider allowing 600 requests a
// minute (first token 300 ms, 150 tokens/s), which the batch saturates;
// 8 questions of 4 candidates each (serve's default is 8; 4 keeps the
// benchmark short), one every 2 s.
func StandardMixed() MixedScenario {
	sc := Standard()
	sc.Name, sc.Examples, sc.RPM = "mixed", 44, 600
	sc.Generators, sc.GeneratorConcurrency, sc.Explorers, sc.ExplorerConcurrency = 2, 8, 1, 8
	sc.Scaling, sc.ScalingExamples, sc.ScalingConcurrency = nil, 0, 0
	return MixedScenario{Scenario: sc, Questions: 8, QuestionVotes: 4, IntervalMS: 2000}
}

// Validate names the first field that cannot run.
func (ms MixedScenario) Validate() error {
	if err := ms.Scenario.Validate(); err != nil {
		return err
	}
	switch {
	case ms.Questions < 1:
		return fmt.Errorf("bench scenario %s: questions (--questions) is %d; it must be at least 1", ms.Name, ms.Questions)
	case ms.QuestionVotes < 1 || ms.QuestionVotes > serve.MaxVotes:
		return fmt.Errorf("bench scenario %s: question_votes (--question-votes) is %d; use 1 to %d", ms.Name, ms.QuestionVotes, serve.MaxVotes)
	case ms.IntervalMS < 0:
		return fmt.Errorf("bench scenario %s: interval_ms is %d; it must not be negative", ms.Name, ms.IntervalMS)
	case ms.RPM <= 0 && ms.TPM <= 0:
		return fmt.Errorf("bench scenario %s: set a provider limit (--rpm or --tpm): without one the batch cannot saturate a quota", ms.Name)
	}
	return nil
}

// MixedReport is what the mixed benchmark measured; its JSON is `quorum
// bench --mixed --json`.
type MixedReport struct {
	Scenario MixedScenario `json:"scenario"`
	// Idle is the questions on the idle cluster; Mixed the same questions
	// while the batch runs.
	Idle  Phase `json:"idle"`
	Mixed Phase `json:"mixed"`
	// RatioP50 is Mixed.P50 / Idle.P50.
	RatioP50 float64     `json:"p50_ratio"`
	Batch    BatchDuring `json:"batch"`
	// Acceptance is the criterion: with a batch in progress,
	// questions' p50 at most twice the idle cluster's, no rate-limited
	// response (provider or client, either phase, batch included) and no
	// failed question. Verdict says which parts held.
	Acceptance bool     `json:"acceptance_met"`
	Verdict    []string `json:"verdict"`
	// RateLimitedSource says where the 429 counts come from.
	RateLimitedSource string `json:"rate_limited_source"`
	// Redis is what Redis held before the idle phase and once the batch
	// and every question ended (their runs' keys, the batch's and the
	// questions', only with an expiry); QuestionFilesLeft counts question
	// runs' folders left under serve's state directory (0: each is
	// removed once its answer is recorded).
	Redis             *RedisFigures `json:"redis,omitempty"`
	QuestionFilesLeft int           `json:"question_files_left"`
}

// Phase is one phase's questions.
type Phase struct {
	Questions []QuestionTiming `json:"questions"`
	Answered  int              `json:"answered"`
	Failed    int              `json:"failed"`
	// P50, P95 and Max are the questions' latency (created to finished,
	// from their records), answered or not.
	P50 float64 `json:"latency_p50_seconds"`
	P95 float64 `json:"latency_p95_seconds"`
	Max float64 `json:"latency_max_seconds"`
	// ClientP50 is the same measured by the client (POST to seeing the
	// answer, polling every 100 ms).
	ClientP50 float64 `json:"client_latency_p50_seconds"`
	// ChainP50 is the questions' p50 critical path (LLM and warehouse
	// time of the slowest candidate chain per round), LimiterWaitP50 their
	// p50 time waiting for the LLM quota (summed over their calls),
	// OutsideServiceP50 their p50 time outside service (see
	// QuestionTiming).
	ChainP50          float64 `json:"critical_path_p50_seconds"`
	LimiterWaitP50    float64 `json:"limiter_wait_p50_seconds"`
	OutsideServiceP50 float64 `json:"outside_service_p50_seconds"`
	// Wall is from the first question asked to the last one finished.
	Wall float64 `json:"wall_seconds"`
	// ProviderRequests and ProviderRateLimited are what llmsim served and
	// answered 429 during the phase, to everyone (the batch included).
	ProviderRequests    int64 `json:"provider_requests"`
	ProviderRateLimited int64 `json:"provider_rate_limited"`
	// QuestionLLMCalls and QuestionRateLimited are the questions' own, from
	// their runs' cost ledgers (429s the LLM client retried).
	QuestionLLMCalls    int `json:"question_llm_calls"`
	QuestionRateLimited int `json:"question_rate_limited"`
	// CPUUtilization is this process's CPU time over the phase's wall
	// time and cores (everything but redis-server runs in it).
	CPUUtilization float64 `json:"cpu_utilization"`
}

// QuestionTiming is one question.
type QuestionTiming struct {
	ID       string `json:"id"`
	DB       string `json:"db"`
	Question string `json:"question"`
	Status   string `json:"status"`
	Error    string `json:"error,omitempty"`
	// AskedAt is seconds from the phase's start.
	AskedAt       float64 `json:"asked_at_seconds"`
	Seconds       float64 `json:"seconds"`
	ClientSeconds float64 `json:"client_seconds"`
	// From the question's run: its critical path; its time outside
	// service (its latency in the run less its service time: the wait
	// for its first task's worker slot, plus the final answer's trip
	// from the voter to the question's coordinator); its time waiting for
	// the LLM quota (over all its calls); its LLM calls and the 429s its
	// client retried.
	ChainSeconds       float64 `json:"critical_path_seconds"`
	OutsideService     float64 `json:"outside_service_seconds"`
	LimiterWaitSeconds float64 `json:"limiter_wait_seconds"`
	LLMCalls           int     `json:"llm_calls"`
	RateLimited        int     `json:"rate_limited"`
	// Finished is when it finished; BeforeBatchEnd says (mixed phase) the
	// batch was still running then.
	Finished       time.Time `json:"finished"`
	BeforeBatchEnd bool      `json:"finished_before_batch_end,omitempty"`
}

// BatchDuring is the batch run, and what it did while the questions ran.
type BatchDuring struct {
	Run      string  `json:"run"`
	Examples int     `json:"examples"`
	Failed   int     `json:"failed_examples"`
	Wall     float64 `json:"wall_seconds"`
	// UnderWaySeconds is how long after the batch's start the questions
	// began; InFlightAtStart the tasks the workers held then (out of
	// GeneratorSlots + ExplorerSlots).
	UnderWaySeconds float64 `json:"under_way_seconds"`
	InFlightAtStart int     `json:"tasks_in_flight_at_first_question"`
	GeneratorSlots  int     `json:"generator_slots"`
	ExplorerSlots   int     `json:"explorer_slots"`
	// During the mixed phase's window (first question asked to last one
	// finished): the batch's examples finished, the LLM calls per minute
	// the provider served to the batch (all of them, less the questions'),
	// and to everyone.
	WindowSeconds          float64 `json:"window_seconds"`
	ExamplesInWindow       int     `json:"examples_finished_in_window"`
	CallsPerMinute         float64 `json:"llm_calls_per_minute_in_window"`
	TotalCallsPerMinute    float64 `json:"all_llm_calls_per_minute_in_window"`
	QuotaShareInWindow     float64 `json:"quota_share_in_window"`
	ClientRateLimited      int     `json:"client_rate_limited"`
	ProviderRateLimited    int64   `json:"provider_rate_limited"`
	FinishedAfterQuestions bool    `json:"finished_after_questions"`
	// ProviderRateLimited and Report's provider counts (LLM calls,
	// tokens, 429s, the quota bound and ratio) run from the batch's start
	// to its end: the questions asked meanwhile are in them, sharing the
	// quota; the idle phase's are not. ClientRateLimited is the batch
	// run's own cost ledger.
	Report *Report `json:"report"`
}

// question is one thing to ask.
type question struct{ db, text string }

// Mixed runs the mixed benchmark: one cluster and llmsim as Run builds
// them, a question API over the same dataset, the questions on the idle
// cluster, then the batch run and, once its tasks hold the worker slots,
// the same questions again.
func Mixed(ctx context.Context, ms MixedScenario, work string, progress io.Writer) (*MixedReport, error) {
	if err := ms.Validate(); err != nil {
		return nil, err
	}
	dir := filepath.Join(work, "mixed")
	r, err := startRig(ctx, ms.Scenario, ms.Examples, ms.Generators, true, dir, nil)
	if err != nil {
		return nil, err
	}
	defer r.close()
	// The question API as `quorum serve` runs it, in the rig's process,
	// the answer cache off so that every question does its work. It
	// stops with the rig.
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	stateDir := filepath.Join(dir, "serve")
	srv, err := serve.Start(r.cl, serve.Config{Dataset: r.dsDir, Votes: ms.QuestionVotes, Seed: ms.Seed, StateDir: stateDir, CacheTTL: -1,
		LLM: "SIMULATED LLM (llmsim) — not a real model"}, serve.Process{Listener: ln})
	if err != nil {
		ln.Close()
		return nil, err
	}
	apiURL := "http://" + ln.Addr().String()

	// The questions: spread over the dataset's first (the base's own)
	// examples.
	var qs []question
	n := len(r.ds.Examples)
	for i := 0; i < ms.Questions; i++ {
		e := r.ds.Examples[(i*n/ms.Questions)%n]
		qs = append(qs, question{db: e.DB, text: e.Question})
	}
	a := &asker{url: apiURL, votes: ms.QuestionVotes, interval: time.Duration(ms.IntervalMS) * time.Millisecond,
		srv: srv, client: &http.Client{Timeout: 30 * time.Second}}
	before, err := redisSize(ctx, r.cl.Redis)
	if err != nil {
		return nil, err
	}
	rep := &MixedReport{Scenario: ms, RateLimitedSource: "provider: llmsim's 429 count over each phase; client: the question runs' and the batch run's cost ledgers (cost.LLM.RateLimited, 429s the LLM client saw and retried)"}

	fmt.Fprintf(progress, "mixed: phase 1, %d questions (%d candidates each) on the idle cluster\n", len(qs), ms.QuestionVotes)
	rep.Idle, err = a.phase(ctx, qs, r)
	if err != nil {
		return nil, err
	}
	fmt.Fprintf(progress, "mixed: idle p50 %.2fs p95 %.2fs max %.2fs\n", rep.Idle.P50, rep.Idle.P95, rep.Idle.Max)

	// Phase 2: the batch, then the questions once it is under way.
	run := fmt.Sprintf("bench-mixed-%d", time.Now().UnixNano())
	cfg, err := r.batch(run, filepath.Join(dir, "out"), progress)
	if err != nil {
		return nil, err
	}
	type result struct {
		out *outputs.Report
		err error
	}
	batchDone := make(chan result, 1)
	batchStart, atStart := time.Now(), r.sim.Stats()
	fmt.Fprintf(progress, "mixed: phase 2, batch run %s: %d examples x %d candidates, %d req/min\n", run, ms.Examples, ms.Votes, ms.RPM)
	// The batch's coordinator runs beside the questions; however Mixed
	// returns, it has stopped before the rig closes.
	batch := &service.Func{Run: func(ctx context.Context) error {
		out, err := coordinator.Run(ctx, cfg)
		batchDone <- result{out, err}
		return nil
	}}
	if err := batch.Start(ctx); err != nil {
		return nil, err
	}
	defer batch.Stop()
	b := &rep.Batch
	b.Run, b.Examples = run, ms.Examples
	b.GeneratorSlots, b.ExplorerSlots = ms.Generators*ms.GeneratorConcurrency, ms.Explorers*ms.ExplorerConcurrency
	underWay := time.Duration(ms.UnderWayTimeoutMS) * time.Millisecond
	if underWay <= 0 {
		underWay = time.Minute
	}
	var early *result
	deadline := time.Now().Add(underWay)
wait:
	for {
		b.InFlightAtStart = inFlight(r.cl.Env.Metrics.Registry)
		if b.InFlightAtStart >= b.GeneratorSlots || time.Now().After(deadline) {
			break
		}
		select {
		case res := <-batchDone:
			early = &res
			break wait
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-time.After(50 * time.Millisecond):
		}
	}
	if early != nil {
		if early.err != nil {
			return nil, fmt.Errorf("batch run: %w", early.err)
		}
		return nil, fmt.Errorf("the batch run finished before its tasks filled the %d generator slots: make it larger (--examples)", b.GeneratorSlots)
	}
	b.UnderWaySeconds = time.Since(batchStart).Seconds()
	fmt.Fprintf(progress, "mixed: batch under way after %.1fs (%d tasks in flight); asking the questions again\n", b.UnderWaySeconds, b.InFlightAtStart)
	rep.Mixed, err = a.phase(ctx, qs, r)
	if err != nil {
		return nil, err
	}
	windowStart, windowEnd := a.start, a.end
	fmt.Fprintf(progress, "mixed: with the batch running p50 %.2fs p95 %.2fs max %.2fs; waiting for the batch to finish\n", rep.Mixed.P50, rep.Mixed.P95, rep.Mixed.Max)
	var bres result
	select {
	case bres = <-batchDone:
	case <-ctx.Done():
		return nil, ctx.Err()
	}
	if bres.err != nil {
		return nil, fmt.Errorf("batch run: %w", bres.err)
	}
	out := bres.out
	for i := range rep.Mixed.Questions {
		q := &rep.Mixed.Questions[i]
		q.BeforeBatchEnd = q.Finished.Before(out.Finished)
	}
	st := statsSince(r.sim.Stats(), atStart)
	b.Report = measure(ms.Scenario, out, st, gather(r.cl.Env.Metrics.Registry), true)
	b.Wall, b.Failed = out.Totals.WallSeconds, out.Totals.Failed
	b.ClientRateLimited = out.Totals.Cost.LLM.RateLimited
	b.ProviderRateLimited = st.RateLimited
	b.FinishedAfterQuestions = out.Finished.After(windowEnd)
	b.WindowSeconds = windowEnd.Sub(windowStart).Seconds()
	for _, e := range out.Examples {
		at := out.Started.Add(time.Duration(e.FinishedSeconds * float64(time.Second)))
		if !at.Before(windowStart) && !at.After(windowEnd) {
			b.ExamplesInWindow++
		}
	}
	if b.WindowSeconds > 0 {
		served := float64(rep.Mixed.ProviderRequests - rep.Mixed.ProviderRateLimited)
		b.TotalCallsPerMinute = served / b.WindowSeconds * 60
		b.CallsPerMinute = (served - float64(rep.Mixed.QuestionLLMCalls)) / b.WindowSeconds * 60
		if ms.RPM > 0 {
			b.QuotaShareInWindow = b.TotalCallsPerMinute / float64(ms.RPM)
		}
	}
	if rep.Idle.P50 > 0 {
		rep.RatioP50 = rep.Mixed.P50 / rep.Idle.P50
	}
	// Serve stopped and its drivers done: every question's clean-up ran.
	srv.Stop()
	runs := []string{run}
	for _, p := range []Phase{rep.Idle, rep.Mixed} {
		for _, q := range p.Questions {
			runs = append(runs, q.ID)
		}
	}
	if rep.Redis, err = redisFigures(ctx, r.cl.Redis, before, runs...); err != nil {
		return nil, err
	}
	left, err := os.ReadDir(filepath.Join(stateDir, "questions"))
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		return nil, err
	}
	rep.QuestionFilesLeft = len(left)
	rep.judge()
	return rep, nil
}

// judge fills the acceptance verdict.
func (rep *MixedReport) judge() {
	ok := true
	say := func(held bool, format string, args ...any) {
		mark := "ok"
		if !held {
			mark, ok = "FAILED", false
		}
		rep.Verdict = append(rep.Verdict, mark+": "+fmt.Sprintf(format, args...))
	}
	say(rep.RatioP50 > 0 && rep.RatioP50 <= 2, "questions' p50 with the batch running is %.2fx the idle cluster's (%.2fs vs %.2fs; at most 2x)", rep.RatioP50, rep.Mixed.P50, rep.Idle.P50)
	limited := rep.Idle.ProviderRateLimited + rep.Mixed.ProviderRateLimited + rep.Batch.ProviderRateLimited +
		int64(rep.Idle.QuestionRateLimited+rep.Mixed.QuestionRateLimited+rep.Batch.ClientRateLimited)
	say(limited == 0, "rate-limited responses: provider %d idle, %d mixed, %d over the whole batch; client: questions %d idle, %d mixed, batch %d",
		rep.Idle.ProviderRateLimited, rep.Mixed.ProviderRateLimited, rep.Batch.ProviderRateLimited,
		rep.Idle.QuestionRateLimited, rep.Mixed.QuestionRateLimited, rep.Batch.ClientRateLimited)
	say(rep.Idle.Failed+rep.Mixed.Failed == 0, "questions failed: %d idle, %d mixed", rep.Idle.Failed, rep.Mixed.Failed)
	rep.Acceptance = ok
}

// asker asks questions over HTTP.
type asker struct {
	url      string
	votes    int
	interval time.Duration
	srv      *serve.Server
	client   *http.Client
	// start and end are the last phase's window.
	start, end time.Time
}

// phase asks every question, one every interval, and waits for their
// answers.
func (a *asker) phase(ctx context.Context, qs []question, r *rig) (Phase, error) {
	var p Phase
	before, cpu := r.sim.Stats(), cpuTime()
	a.start = time.Now()
	timings := make([]QuestionTiming, len(qs))
	errs := make([]error, len(qs))
	var wg sync.WaitGroup
	for i, q := range qs {
		if i > 0 {
			select {
			case <-time.After(time.Until(a.start.Add(time.Duration(i) * a.interval))):
			case <-ctx.Done():
			}
		}
		askedAt := time.Since(a.start).Seconds()
		wg.Add(1)
		go func() {
			defer wg.Done()
			t, err := a.ask(ctx, q)
			t.AskedAt = askedAt
			timings[i], errs[i] = t, err
		}()
	}
	wg.Wait()
	a.end = time.Now()
	if err := errors.Join(errs...); err != nil {
		return p, err
	}
	after := r.sim.Stats()
	p.Wall = a.end.Sub(a.start).Seconds()
	if p.Wall > 0 {
		p.CPUUtilization = (cpuTime() - cpu).Seconds() / (p.Wall * float64(runtime.NumCPU()))
	}
	p.ProviderRequests, p.ProviderRateLimited = after.Requests-before.Requests, after.RateLimited-before.RateLimited
	var lat, client, chain, limiter, outside []float64
	for i := range timings {
		t := &timings[i]
		if t.Status == serve.Answered {
			p.Answered++
		} else {
			p.Failed++
		}
		p.QuestionLLMCalls += t.LLMCalls
		p.QuestionRateLimited += t.RateLimited
		lat, client = append(lat, t.Seconds), append(client, t.ClientSeconds)
		chain, limiter, outside = append(chain, t.ChainSeconds), append(limiter, t.LimiterWaitSeconds), append(outside, t.OutsideService)
		p.Max = max(p.Max, t.Seconds)
	}
	p.Questions = timings
	p.P50, p.P95 = quantile(lat, 0.5), quantile(lat, 0.95)
	p.ClientP50, p.ChainP50 = quantile(client, 0.5), quantile(chain, 0.5)
	p.LimiterWaitP50, p.OutsideServiceP50 = quantile(limiter, 0.5), quantile(outside, 0.5)
	return p, nil
}

// ask posts one question and polls it until it is finished.
func (a *asker) ask(ctx context.Context, q question) (QuestionTiming, error) {
	t := QuestionTiming{DB: q.db, Question: q.text}
	body, _ := json.Marshal(map[string]any{"db": q.db, "question": q.text, "votes": a.votes, "cache": false})
	posted := time.Now()
	var acc struct {
		ID string `json:"id"`
	}
	if err := a.call(ctx, http.MethodPost, a.url+"/v1/questions", body, http.StatusAccepted, &acc); err != nil {
		return t, fmt.Errorf("asking %q: %w", q.text, err)
	}
	t.ID = acc.ID
	var rec serve.Question
	for {
		if err := a.call(ctx, http.MethodGet, a.url+"/v1/questions/"+acc.ID, nil, http.StatusOK, &rec); err != nil {
			return t, fmt.Errorf("question %s: %w", acc.ID, err)
		}
		if rec.Terminal() {
			break
		}
		select {
		case <-ctx.Done():
			return t, ctx.Err()
		case <-time.After(100 * time.Millisecond):
		}
	}
	t.ClientSeconds = time.Since(posted).Seconds()
	t.Status, t.Error = rec.Status, rec.Error
	t.Seconds, t.Finished = rec.Finished.Sub(rec.Created).Seconds(), rec.Finished
	t.LLMCalls = rec.Cost.LLMCalls
	// The question's run: where its time went, from its record (its
	// run's files are removed once the answer is recorded).
	timing, err := a.srv.Timing(ctx, acc.ID)
	if err != nil {
		return t, fmt.Errorf("question %s: %w", acc.ID, err)
	}
	if timing != nil {
		t.ChainSeconds = timing.CriticalPathSeconds
		t.OutsideService = max(0, timing.LatencySeconds-timing.ServiceSeconds)
		t.LimiterWaitSeconds = timing.LimiterWaitSeconds
		t.RateLimited = timing.RateLimited
	}
	return t, nil
}

func (a *asker) call(ctx context.Context, method, url string, body []byte, want int, into any) error {
	req, err := http.NewRequestWithContext(ctx, method, url, bytes.NewReader(body))
	if err != nil {
		return err
	}
	req.Header.Set("Content-Type", "application/json")
	resp, err := a.client.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != want {
		return fmt.Errorf("%s %s: %s: %s", method, url, resp.Status, strings.TrimSpace(string(b)))
	}
	return json.Unmarshal(b, into)
}

// statsSince is the provider's counts between two snapshots (the fields
// measure reads).
func statsSince(now, then llmsim.Stats) llmsim.Stats {
	now.Requests -= then.Requests
	now.RateLimited -= then.RateLimited
	now.Faults -= then.Faults
	now.Unknown -= then.Unknown
	now.UnknownExample -= then.UnknownExample
	now.PromptTokens -= then.PromptTokens
	now.CompletionTokens -= then.CompletionTokens
	now.ByKind, now.ToolCalls = nil, nil
	return now
}

// inFlight is the tasks the cluster's workers hold now.
func inFlight(reg *prometheus.Registry) int {
	mfs, err := reg.Gather()
	if err != nil {
		return 0
	}
	n := 0.0
	for _, mf := range mfs {
		if mf.GetName() != "quorum_tasks_in_flight" {
			continue
		}
		for _, m := range mf.GetMetric() {
			n += m.GetGauge().GetValue()
		}
	}
	return int(n)
}
