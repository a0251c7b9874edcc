package bench

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"math"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/quorumsql/quorum/internal/queue"
	"github.com/quorumsql/quorum/internal/ratelimit"
	"github.com/quorumsql/quorum/internal/runtime/cluster"
	"github.com/quorumsql/quorum/internal/runtime/coordinator"
	"github.com/quorumsql/quorum/pkg/agents"
	"github.com/quorumsql/quorum/pkg/dataset"
	"github.com/quorumsql/quorum/pkg/llm"
	"github.com/quorumsql/quorum/pkg/llmsim"
)

// DeployScenario is issue 33's scenarios (a) and (b): one model behind
// several llmsim deployments, each with its own requests-per-minute
// limit; (b) kills the first deployment for KillSeconds mid-run.
type DeployScenario struct {
	Dataset  string `json:"dataset"`
	Examples int    `json:"examples"`
	Votes    int    `json:"votes"`
	Seed     uint64 `json:"seed"`
	// RPM is each deployment's limit, enforced by its simulator and
	// known to the limiter.
	RPM             []int   `json:"rpm"`
	FirstTokenMS    int     `json:"first_token_ms"`
	TokensPerSecond float64 `json:"tokens_per_second"`
	// Generators etc. as in Scenario.
	Generators           int `json:"generators"`
	GeneratorConcurrency int `json:"generator_concurrency"`
	Explorers            int `json:"explorers"`
	ExplorerConcurrency  int `json:"explorer_concurrency"`
	// KillAfterSeconds into run (b), the first deployment stops (its
	// listener and connections closed) for KillSeconds.
	KillAfterSeconds float64 `json:"kill_after_seconds"`
	KillSeconds      float64 `json:"kill_seconds"`
	// CooldownSeconds is the deployments' cooldown after failures.
	CooldownSeconds float64 `json:"cooldown_seconds"`
}

// Deployments is the full form: 300/200/100 rpm, the 300 killed for 60 s.
func Deployments() DeployScenario {
	return DeployScenario{Dataset: "examples/demo", Examples: 120, Votes: 8, Seed: 1, RPM: []int{300, 200, 100},
		FirstTokenMS: 300, TokensPerSecond: 150, Generators: 2, GeneratorConcurrency: 24, Explorers: 1, ExplorerConcurrency: 24,
		KillAfterSeconds: 60, KillSeconds: 60, CooldownSeconds: 10}
}

// DeployRun is one run's figures.
type DeployRun struct {
	Wall float64 `json:"wall_seconds"`
	// Calls each deployment served (429s excluded), and its 429s.
	Served      []int64 `json:"served_by_deployment"`
	RateLimited int64   `json:"rate_limited"`
	Examples    int     `json:"examples"`
	Failed      int     `json:"failed_examples"`
	Fallbacks   int     `json:"fallback_calls"`
	// KilledSeconds the first deployment was down; Capacity the calls
	// the deployments up could serve over the wall (less one burst);
	// QuotaRatio the calls served over it.
	KilledSeconds float64 `json:"killed_seconds,omitempty"`
	Capacity      float64 `json:"capacity_calls"`
	QuotaRatio    float64 `json:"quota_ratio"`
	answers       map[string]string
}

// DeployReport is the scenarios' results, in bench.json.
type DeployReport struct {
	Scenario DeployScenario `json:"scenario"`
	A        DeployRun      `json:"a_all_up"`
	B        DeployRun      `json:"b_one_killed"`
	// SameAnswers: (b) answered every example as (a) did; Differing
	// lists the answer files that differ.
	SameAnswers bool     `json:"same_answers"`
	Differing   []string `json:"differing,omitempty"`
}

// RunDeployments runs scenario (a), then (b), in work.
func RunDeployments(ctx context.Context, sc DeployScenario, work string, progress io.Writer) (*DeployReport, error) {
	if len(sc.RPM) < 2 || sc.Examples < 1 || sc.Votes < 1 {
		return nil, fmt.Errorf("deployments scenario: %d deployments, %d examples, %d votes; want at least 2, 1, 1", len(sc.RPM), sc.Examples, sc.Votes)
	}
	rep := &DeployReport{Scenario: sc}
	fmt.Fprintf(progress, "deployments (a): %v rpm, all up\n", sc.RPM)
	a, err := runDeployments(ctx, sc, false, filepath.Join(work, "a"), progress)
	if err != nil {
		return nil, fmt.Errorf("scenario (a): %w", err)
	}
	fmt.Fprintf(progress, "deployments (b): %v rpm, the first down for %gs after %gs\n", sc.RPM, sc.KillSeconds, sc.KillAfterSeconds)
	b, err := runDeployments(ctx, sc, true, filepath.Join(work, "b"), progress)
	if err != nil {
		return nil, fmt.Errorf("scenario (b): %w", err)
	}
	rep.A, rep.B = *a, *b
	for name, text := range a.answers {
		if b.answers[name] != text {
			rep.Differing = append(rep.Differing, name)
		}
	}
	for name := range b.answers {
		if _, ok := a.answers[name]; !ok {
			rep.Differing = append(rep.Differing, name)
		}
	}
	rep.SameAnswers = len(rep.Differing) == 0 && len(a.answers) > 0
	return rep, nil
}

// killable is a simulator deployment that can be stopped and brought
// back on the same address.
type killable struct {
	handler http.Handler
	addr    string
	mu      sync.Mutex
	srv     *http.Server
	done    chan struct{}
}

func (k *killable) start() error {
	ln, err := net.Listen("tcp", k.addr)
	if err != nil {
		return err
	}
	k.mu.Lock()
	defer k.mu.Unlock()
	k.addr = ln.Addr().String()
	k.srv = &http.Server{Handler: k.handler, ReadHeaderTimeout: 10 * time.Second}
	k.done = make(chan struct{})
	go func(srv *http.Server, done chan struct{}) {
		defer close(done)
		_ = srv.Serve(ln)
	}(k.srv, k.done)
	return nil
}

// kill closes the listener and every connection at once, as a crashed
// server would.
func (k *killable) kill() {
	k.mu.Lock()
	srv, done := k.srv, k.done
	k.srv = nil
	k.mu.Unlock()
	if srv != nil {
		_ = srv.Close()
		<-done
	}
}

func runDeployments(ctx context.Context, sc DeployScenario, kill bool, dir string, progress io.Writer) (*DeployRun, error) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, err
	}
	dsDir, err := MakeDataset(sc.Dataset, sc.Examples, filepath.Join(dir, "dataset"))
	if err != nil {
		return nil, err
	}
	ds, err := dataset.Load(dsDir, dataset.Options{})
	if err != nil {
		return nil, err
	}
	var sims []*llmsim.Server
	var deps []*killable
	defer func() {
		for _, d := range deps {
			d.kill()
		}
	}()
	cfg := llm.Config{BaseURL: "http://127.0.0.1:1/v1", APIKey: "bench", Default: llm.ModelConfig{Name: "gpt-4o"},
		DeploymentCooldown: time.Duration(sc.CooldownSeconds * float64(time.Second))}
	total := 0
	for i, rpm := range sc.RPM {
		sim, err := llmsim.New(llmsim.Config{Dataset: ds, Seed: sc.Seed, Noise: llmsim.DefaultNoise(), Limits: llmsim.Limits{RequestsPerMinute: rpm},
			Latency: llmsim.Latency{FirstToken: time.Duration(sc.FirstTokenMS) * time.Millisecond, TokensPerSecond: sc.TokensPerSecond}})
		if err != nil {
			return nil, err
		}
		d := &killable{handler: sim, addr: "127.0.0.1:0"}
		if err := d.start(); err != nil {
			return nil, err
		}
		sims, deps = append(sims, sim), append(deps, d)
		name := fmt.Sprintf("deployment-%d", i+1)
		cfg.Endpoints = append(cfg.Endpoints, llm.Endpoint{Name: name, BaseURL: "http://" + d.addr + "/v1", APIKey: "bench",
			Quota: llm.Quota{RequestsPerMinute: float64(rpm)}})
		cfg.Default.Deployments = append(cfg.Default.Deployments, llm.Deployment{Endpoint: name})
		total += rpm
	}
	quota := ratelimit.LLMQuota{RequestsPerMinute: float64(total)}
	held := cluster.DefaultHeld(sc.GeneratorConcurrency, quota)
	cl, err := cluster.Start(ctx, cluster.Config{StateDir: filepath.Join(dir, "state"), LLM: cfg,
		Generators: sc.Generators, GeneratorConcurrency: sc.GeneratorConcurrency, MaxHeld: held,
		Explorers: sc.Explorers, ExplorerConcurrency: sc.ExplorerConcurrency, Queue: queue.Config{AckWait: 2 * time.Minute},
		Agents: agents.Builtin()})
	if err != nil {
		return nil, err
	}
	defer cl.Close()
	r := &rig{sc: Scenario{Dataset: sc.Dataset, Seed: sc.Seed, Votes: sc.Votes}, generators: sc.Generators, held: held, dsDir: dsDir, ds: ds, quota: quota, cl: cl}
	out := filepath.Join(dir, "out")
	ccfg, err := r.batch(fmt.Sprintf("deploy-%d", time.Now().UnixNano()), out, progress)
	if err != nil {
		return nil, err
	}
	run := &DeployRun{}
	killed := make(chan error, 1)
	stop := make(chan struct{})
	if kill {
		go func() {
			killed <- func() error {
				select {
				case <-time.After(time.Duration(sc.KillAfterSeconds * float64(time.Second))):
				case <-stop:
					return nil
				}
				fmt.Fprintf(progress, "killing deployment-1 for %gs\n", sc.KillSeconds)
				deps[0].kill()
				down := time.Now()
				select {
				case <-time.After(time.Duration(sc.KillSeconds * float64(time.Second))):
				case <-stop:
				}
				run.KilledSeconds = time.Since(down).Seconds()
				fmt.Fprintln(progress, "deployment-1 back")
				return deps[0].start()
			}()
		}()
	} else {
		killed <- nil
	}
	rr, err := coordinator.Run(ctx, ccfg)
	close(stop)
	if kerr := <-killed; err == nil && kerr != nil {
		err = fmt.Errorf("bring deployment-1 back: %w", kerr)
	}
	if err != nil {
		return nil, err
	}
	t := rr.Totals
	run.Wall, run.Examples, run.Failed = t.WallSeconds, t.Examples, t.Failed
	run.Fallbacks = t.Cost.LLM.Fallbacks
	served := 0.0
	for _, s := range sims {
		st := s.Stats()
		n := st.Requests - st.RateLimited - st.Faults
		run.Served = append(run.Served, n)
		run.RateLimited += st.RateLimited
		served += float64(n)
	}
	// The calls the deployments up could serve over the wall, their
	// bursts of half a second's worth aside (as measure's quota bound).
	perSec := float64(total) / 60
	run.Capacity = perSec*run.Wall - float64(sc.RPM[0])/60*run.KilledSeconds
	if run.Capacity > 0 {
		run.QuotaRatio = math.Min(served, served-perSec/2) / run.Capacity
	}
	if run.answers, err = answerFiles(out); err != nil {
		return nil, err
	}
	fmt.Fprintf(progress, "  %d examples (%d failed) in %.1fs: served %v, %d 429s, quota ratio %.3f\n", run.Examples, run.Failed, run.Wall,
		run.Served, run.RateLimited, run.QuotaRatio)
	return run, nil
}

// answerFiles are a run's answer files (SQL and CSV) by path.
func answerFiles(out string) (map[string]string, error) {
	files := map[string]string{}
	err := filepath.WalkDir(out, func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		if !strings.HasSuffix(p, ".sql") && !strings.HasSuffix(p, ".csv") {
			return nil
		}
		b, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(out, p)
		files[rel] = string(b)
		return nil
	})
	if errors.Is(err, fs.ErrNotExist) {
		return nil, fmt.Errorf("no answers in %s", out)
	}
	return files, err
}
