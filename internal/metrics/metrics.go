// Package metrics holds each role's Prometheus metrics and the small HTTP
// server every process runs: /healthz, /readyz and /metrics.
package metrics

import (
	"net"
	"net/http"
	"regexp"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/quorumsql/quorum/internal/service"
	"github.com/quorumsql/quorum/pkg/cost"
)

// Metrics are one process's metrics, in their own registry.
type Metrics struct {
	Registry      *prometheus.Registry
	Tasks         *prometheus.CounterVec
	InFlight      *prometheus.GaugeVec
	Redeliveries  *prometheus.CounterVec
	LLMCalls      *prometheus.CounterVec
	LLMTokens     *prometheus.CounterVec
	LLMMoney      *prometheus.CounterVec
	LLMLatency    prometheus.Histogram
	RateLimited   prometheus.Counter
	LimiterWait   prometheus.Histogram
	Queries       *prometheus.CounterVec
	QueryLatency  prometheus.Histogram
	Decisions     *prometheus.CounterVec
	FinalAnswers  *prometheus.CounterVec
	ExamplesTotal *prometheus.GaugeVec
	// TaskTime splits the workers' time on tasks by part: the runtime's own
	// (decode, redis, blob, nats) and the agent's (execute).
	TaskTime *prometheus.CounterVec
	// TaskRuntime is each task's time in its worker outside the agent's
	// execute: the runtime's overhead per task, whose median and p95 the
	// bench reports.
	TaskRuntime prometheus.Histogram
	// Questions, QuestionsRunning and EventStreams are quorum serve's,
	// aggregated: a question id is never a label (the series would grow
	// with every question and list every id to whoever reads /metrics).
	Questions        *prometheus.CounterVec
	QuestionsRunning prometheus.Gauge
	EventStreams     prometheus.Gauge
	StreamsRefused   *prometheus.CounterVec
	// DeploymentCooldowns and DeploymentDown are the LLM deployments'
	// health as this process saw it (the cluster-wide state is in
	// Redis); LLMFallbacks counts calls a fallback model answered.
	DeploymentCooldowns *prometheus.CounterVec
	DeploymentDown      *prometheus.GaugeVec
	LLMFallbacks        prometheus.Counter

	own []prometheus.Collector
}

// New registers the metrics of a process playing role.
func New(role string) *Metrics {
	reg := prometheus.NewRegistry()
	reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	c := prometheus.Labels{"role": role}
	m := &Metrics{
		Registry: reg,
		Tasks: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "quorum_tasks_total", Help: "Tasks handled, by stage, warehouse and outcome (ack, retry, gave_up, handed_back).", ConstLabels: c},
			[]string{"stage", "warehouse", "outcome"}),
		InFlight: prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "quorum_tasks_in_flight", Help: "Tasks being handled now.", ConstLabels: c},
			[]string{"stage", "warehouse"}),
		Redeliveries: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "quorum_redeliveries_total", Help: "Messages handled on a second or later delivery.", ConstLabels: c},
			[]string{"stage", "warehouse"}),
		LLMCalls: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "quorum_llm_calls_total", Help: "LLM calls, by agent stage and result.", ConstLabels: c},
			[]string{"stage", "result"}),
		LLMTokens: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "quorum_llm_tokens_total", Help: "LLM tokens, by kind (prompt, completion, reasoning, cached).", ConstLabels: c},
			[]string{"kind"}),
		LLMMoney: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "quorum_llm_money_total", Help: "What LLM calls cost at the endpoints' prices, by agent stage and endpoint/model.", ConstLabels: c},
			[]string{"stage", "model"}),
		LLMLatency: prometheus.NewHistogram(prometheus.HistogramOpts{Name: "quorum_llm_call_seconds", Help: "Latency of LLM calls, retries included.", ConstLabels: c,
			Buckets: prometheus.ExponentialBuckets(0.05, 2, 14)}),
		RateLimited: prometheus.NewCounter(prometheus.CounterOpts{Name: "quorum_llm_rate_limited_total", Help: "429 responses from the LLM provider.", ConstLabels: c}),
		LimiterWait: prometheus.NewHistogram(prometheus.HistogramOpts{Name: "quorum_limiter_wait_seconds", Help: "Time spent waiting for the shared quota per task.", ConstLabels: c,
			Buckets: prometheus.ExponentialBuckets(0.01, 2, 14)}),
		Queries: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "quorum_warehouse_queries_total", Help: "Warehouse queries, by result.", ConstLabels: c},
			[]string{"result"}),
		QueryLatency: prometheus.NewHistogram(prometheus.HistogramOpts{Name: "quorum_warehouse_query_seconds", Help: "Mean warehouse query latency per task.", ConstLabels: c,
			Buckets: prometheus.ExponentialBuckets(0.001, 2, 16)}),
		Decisions: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "quorum_voter_decisions_total", Help: "Votes decided, by round, confidence and method.", ConstLabels: c},
			[]string{"round", "confidence", "method"}),
		FinalAnswers: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "quorum_final_answers_total", Help: "Examples finished, by status.", ConstLabels: c},
			[]string{"status"}),
		ExamplesTotal: prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "quorum_run_examples", Help: "Examples of the coordinator's run, by state (total, final).", ConstLabels: c},
			[]string{"run", "state"}),
		TaskTime: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "quorum_task_time_seconds_total", Help: "Workers' time on tasks, by part: decode, redis, blob, nats (the runtime's) and execute (the agent's).", ConstLabels: c},
			[]string{"part"}),
		TaskRuntime: prometheus.NewHistogram(prometheus.HistogramOpts{Name: "quorum_task_runtime_seconds", Help: "Each executed task's time in its worker outside the agent's execute (decoding, Redis, blobs, NATS, bookkeeping).", ConstLabels: c,
			Buckets: prometheus.ExponentialBuckets(0.0001, 1.2, 64)}),
		Questions: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "quorum_serve_questions_total", Help: "Questions finished by quorum serve, by status (answered, failed, cancelled) and whether the cache answered.", ConstLabels: c},
			[]string{"status", "cached"}),
		QuestionsRunning: prometheus.NewGauge(prometheus.GaugeOpts{Name: "quorum_serve_questions_running", Help: "Questions this serve process drives now.", ConstLabels: c}),
		EventStreams:     prometheus.NewGauge(prometheus.GaugeOpts{Name: "quorum_serve_event_streams", Help: "Open question event streams of this serve process.", ConstLabels: c}),
		StreamsRefused: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "quorum_serve_event_streams_refused_total", Help: "Event streams refused with 429, by cap (tenant, total).", ConstLabels: c},
			[]string{"cap"}),
		DeploymentCooldowns: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "quorum_llm_deployment_cooldowns_total", Help: "LLM deployments cooled down after failures in a row, by endpoint and model.", ConstLabels: c},
			[]string{"endpoint", "model"}),
		DeploymentDown: prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "quorum_llm_deployment_down", Help: "1 while an LLM deployment this process cooled down is out (until a call succeeds on it again), by endpoint and model.", ConstLabels: c},
			[]string{"endpoint", "model"}),
		LLMFallbacks: prometheus.NewCounter(prometheus.CounterOpts{Name: "quorum_llm_fallback_calls_total", Help: "LLM calls answered by a fallback model, every deployment of the role's own being down.", ConstLabels: c}),
	}
	m.own = []prometheus.Collector{m.DeploymentCooldowns, m.DeploymentDown, m.LLMFallbacks, m.Tasks, m.InFlight, m.Redeliveries, m.LLMCalls, m.LLMTokens, m.LLMMoney, m.LLMLatency, m.RateLimited, m.LimiterWait,
		m.Queries, m.QueryLatency, m.Decisions, m.FinalAnswers, m.ExamplesTotal, m.TaskTime, m.TaskRuntime, m.Questions, m.QuestionsRunning, m.EventStreams, m.StreamsRefused}
	reg.MustRegister(m.own...)
	return m
}

var fqName = regexp.MustCompile(`fqName: "([^"]+)"`)

// Names lists quorum's metric names as Prometheus exposes them (histograms
// add _bucket, _sum and _count), for checking dashboards against them.
func (m *Metrics) Names() []string {
	var out []string
	for _, c := range m.own {
		ch := make(chan *prometheus.Desc, 4)
		go func() { c.Describe(ch); close(ch) }()
		for d := range ch {
			if sm := fqName.FindStringSubmatch(d.String()); sm != nil {
				out = append(out, sm[1])
				if _, ok := c.(prometheus.Histogram); ok {
					out = append(out, sm[1]+"_bucket", sm[1]+"_sum", sm[1]+"_count")
				}
			}
		}
	}
	return out
}

// Begin counts a task in flight until the returned function is called.
func (m *Metrics) Begin(stage, warehouse string) func() {
	if m == nil {
		return func() {}
	}
	g := m.InFlight.WithLabelValues(stage, warehouse)
	g.Inc()
	return g.Dec
}

// Since adds the time since start to a part of the workers' task time.
func (m *Metrics) Since(part string, start time.Time) {
	if m == nil {
		return
	}
	m.TaskTime.WithLabelValues(part).Add(time.Since(start).Seconds())
}

// ObserveRuntime records an executed task's time outside the agent's
// execute: its time since start less executing.
func (m *Metrics) ObserveRuntime(start time.Time, executing time.Duration) {
	if m == nil {
		return
	}
	m.TaskRuntime.Observe((time.Since(start) - executing).Seconds())
}

// ObserveCost records what a task spent.
func (m *Metrics) ObserveCost(stage string, c cost.Cost) {
	if m == nil {
		return
	}
	m.LLMCalls.WithLabelValues(stage, "ok").Add(float64(c.LLMCalls - c.LLMErrors))
	m.LLMCalls.WithLabelValues(stage, "error").Add(float64(c.LLMErrors))
	m.LLMTokens.WithLabelValues("prompt").Add(float64(c.LLM.PromptTokens))
	m.LLMTokens.WithLabelValues("completion").Add(float64(c.LLM.CompletionTokens))
	m.LLMTokens.WithLabelValues("reasoning").Add(float64(c.LLM.ReasoningTokens))
	m.LLMTokens.WithLabelValues("cached").Add(float64(c.LLM.CachedTokens))
	for model, mc := range c.ByModel {
		if mc.Money > 0 {
			m.LLMMoney.WithLabelValues(stage, model).Add(mc.Money)
		}
	}
	if c.LLMCalls > 0 {
		m.LLMLatency.Observe(c.LLM.Latency.Seconds() / float64(c.LLMCalls))
	}
	m.RateLimited.Add(float64(c.LLM.RateLimited))
	m.LLMFallbacks.Add(float64(c.LLM.Fallbacks))
	m.LimiterWait.Observe(c.LLM.LimiterWait.Seconds())
	m.Queries.WithLabelValues("ok").Add(float64(c.Queries - c.QueryErrors))
	m.Queries.WithLabelValues("error").Add(float64(c.QueryErrors))
	if c.Queries > 0 {
		m.QueryLatency.Observe(c.QueryTime.Seconds() / float64(c.Queries))
	}
}

// Handle registers /healthz, /readyz (ready, when set, must return nil)
// and /metrics on mux.
func Handle(mux *http.ServeMux, m *Metrics, ready func() error) {
	HandleHealth(mux, ready)
	mux.Handle("GET /metrics", promhttp.HandlerFor(m.Registry, promhttp.HandlerOpts{}))
}

// HandleHealth registers /healthz and /readyz only: for a public listener,
// where /metrics (every role's internals) has no business.
func HandleHealth(mux *http.ServeMux, ready func() error) {
	mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, _ *http.Request) { w.Write([]byte("ok\n")) })
	mux.HandleFunc("GET /readyz", func(w http.ResponseWriter, _ *http.Request) {
		if ready != nil {
			if err := ready(); err != nil {
				http.Error(w, "not ready: "+err.Error(), http.StatusServiceUnavailable)
				return
			}
		}
		w.Write([]byte("ready\n"))
	})
}

// Listen listens on addr for the health and metrics endpoints and returns
// the component serving them from Start until Stop. ready reports
// readiness (connected to NATS and Redis).
func Listen(addr string, m *Metrics, ready func() error) (*service.HTTP, error) {
	mux := http.NewServeMux()
	Handle(mux, m, ready)
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, err
	}
	return &service.HTTP{Server: &http.Server{Handler: mux, ReadHeaderTimeout: 5 * time.Second}, Listener: ln}, nil
}

// DeploymentHealth records an LLM deployment cooled down (d > 0) or back.
func (m *Metrics) DeploymentHealth(endpoint, model string, d time.Duration) {
	if m == nil {
		return
	}
	if d > 0 {
		m.DeploymentCooldowns.WithLabelValues(endpoint, model).Inc()
		m.DeploymentDown.WithLabelValues(endpoint, model).Set(1)
		return
	}
	m.DeploymentDown.WithLabelValues(endpoint, model).Set(0)
}
