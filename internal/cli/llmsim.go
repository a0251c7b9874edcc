package cli

import (
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/http"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/quorumsql/quorum/internal/service"
	"github.com/quorumsql/quorum/pkg/llmsim"
)

const simBanner = `quorum llmsim — a SIMULATED LLM, not a real model.
It answers from the dataset's gold SQL with configured noise, latency,
rate limits and faults, for demos, tests and benchmarks.`

func newLLMSimCmd() *cobra.Command {
	var (
		df       datasetFlags
		dsDir    string
		addr     string
		seed     uint64
		noise    = llmsim.DefaultNoise()
		lat      llmsim.Latency
		limits   llmsim.Limits
		faults   llmsim.Faults
		personas llmsim.Personas
		showCfg  bool
		mix      string
	)
	cmd := &cobra.Command{
		Use:   "llmsim --dataset DIR",
		Short: "Serve quorum's simulated LLM (OpenAI-compatible) for demos, tests and benchmarks",
		Long: simBanner + `

Endpoints: POST /v1/chat/completions (streaming or not), the Azure form
/openai/deployments/{name}/chat/completions, GET /v1/models, GET /stats.
Point any OpenAI-compatible client at http://ADDR/v1 with any API key.
Requests with tools get simulated tool calls (a tool taking SQL gets the
SQL the text answer would hold) until a tool result comes back; stop and
max_tokens cut answers as a real model's would (finish_reason "stop" or
"length"). /stats counts tool calls by kind.
Answers depend only on --seed, the messages and the request's seed field.
Numeric limits and rates of 0 mean unlimited or off.

--persona makes replies take a real model family's surface form (same SQL
and decisions, different wrapping), by the request's model field:
--persona deepseek-r1 for every model, --persona o3-mini=o3,r1=deepseek-r1
per model (repeatable; a bare PERSONA sets the default). Personas:
` + personaHelp(),
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if dsDir == "" {
				return errors.New("--dataset is required: the simulator answers from a dataset's gold SQL (try --dataset examples/demo)")
			}
			ds, err := df.load(dsDir)
			if err != nil {
				return err
			}
			difficulty, err := llmsim.ParseDifficulty(mix)
			if err != nil {
				return usage(fmt.Errorf("--difficulty: %w", err))
			}
			sim, err := llmsim.New(llmsim.Config{Dataset: ds, Seed: seed, Noise: noise, Latency: lat, Limits: limits, Faults: faults, Personas: personas, Difficulty: difficulty})
			if err != nil {
				return err
			}
			ln, err := net.Listen("tcp", addr)
			if err != nil {
				return fmt.Errorf("--listen %s: %w", addr, err)
			}
			out := cmd.OutOrStdout()
			fmt.Fprintln(out, simBanner)
			fmt.Fprintf(out, "\nServing %d examples from %s on http://%s/v1 (seed %d)\n", len(ds.Examples), dsDir, ln.Addr(), seed)
			if len(personas) > 0 {
				fmt.Fprintf(out, "Personas (model=persona; a bare name is the default): %s\n", personas)
			}
			if showCfg {
				b, _ := json.MarshalIndent(map[string]any{"noise": noise, "latency": lat, "limits": limits, "faults": faults, "personas": personas}, "", "  ")
				fmt.Fprintln(out, string(b))
			}
			h := &service.HTTP{Server: &http.Server{Handler: sim, ReadHeaderTimeout: 10 * time.Second}, Listener: ln, ShutdownTimeout: 5 * time.Second}
			_ = h.Start(cmd.Context()) // a new component starts
			select {
			case <-h.Done():
			case <-cmd.Context().Done():
			}
			h.Stop()
			if err := h.Err(); err != nil {
				return err
			}
			st := sim.Stats()
			b, _ := json.MarshalIndent(st, "", "  ")
			fmt.Fprintf(out, "\nllmsim summary (simulated model):\n%s\n", b)
			return nil
		},
	}
	df.register(cmd)
	f := cmd.Flags()
	f.StringVar(&dsDir, "dataset", "", "dataset folder with gold SQL (Spider 2.0 layout or Spider 1.0/BIRD)")
	f.StringVar(&addr, "listen", "127.0.0.1:8089", "HOST:PORT to listen on")
	deprecate(f, "listen", "addr")
	f.Uint64Var(&seed, "seed", 1, "seed of the simulated answers")
	f.Float64Var(&noise.Gold, "p-gold", noise.Gold, "probability that a first answer is the gold SQL")
	f.Float64Var(&noise.SyntaxError, "p-syntax-error", noise.SyntaxError, "relative weight of answers with a syntax error")
	f.Float64Var(&noise.Empty, "p-empty", noise.Empty, "relative weight of answers returning no rows")
	f.Float64Var(&noise.Wrong, "p-wrong", noise.Wrong, "relative weight of wrong but valid answers")
	f.StringVar(&mix, "difficulty", "", "a mix of easy, medium and hard questions (easy=W,medium=W,hard=W, or default): each question's skill by its tier, and a hard question's wrong answers mostly the same; unset keeps one uniform skill")
	f.Float64Var(&noise.Fix, "p-fix", noise.Fix, "probability that a refinement with error feedback returns the gold SQL")
	f.Float64Var(&noise.ExploreRight, "p-explore-right", noise.ExploreRight, "probability that exploration queries touch the gold tables")
	f.Float64Var(&noise.ExploreError, "p-explore-error", noise.ExploreError, "probability that an exploration answer has a query to correct")
	f.Float64Var(&noise.Link, "p-link", noise.Link, "probability of a correct schema-linking or vote answer")
	f.DurationVar(&lat.FirstToken, "ttft", 300*time.Millisecond, "time to first token")
	f.Float64Var(&lat.TokensPerSecond, "tps", 80, "completion tokens per second (0 = instant)")
	f.Float64Var(&lat.Sigma, "jitter", 0.3, "log-normal latency jitter (sigma)")
	f.IntVar(&limits.RequestsPerMinute, "llm-rpm", 0, "requests per minute before 429s (0 = unlimited)")
	f.IntVar(&limits.TokensPerMinute, "llm-tpm", 0, "tokens per minute before 429s (0 = unlimited)")
	deprecate(f, "llm-rpm", "rpm")
	deprecate(f, "llm-tpm", "tpm")
	f.IntVar(&limits.MaxConcurrency, "max-concurrency", 0, "concurrent requests before 429s (0 = unlimited)")
	f.BoolVar(&limits.Silent, "silent-limits", false, "state no x-ratelimit-* headers, as a provider or gateway that does not say its limits (429s still carry Retry-After)")
	f.Float64Var(&faults.ServerError, "p-5xx", 0, "probability of a 500/502/503 per attempt")
	f.Float64Var(&faults.Hang, "p-hang", 0, "probability that an attempt hangs before any response headers (a dead endpoint)")
	f.Float64Var(&faults.Malformed, "p-malformed", 0, "probability of a malformed response body")
	f.Float64Var(&faults.Stall, "p-stall", 0, "probability that a reply stalls part-way: headers and the first chunks, then silence until the connection drops (after --hang-for)")
	f.DurationVar(&faults.HangFor, "hang-for", 10*time.Minute, "how long a hung or stalled attempt lasts")
	f.BoolVar(&showCfg, "show-config", false, "print the effective configuration at start")
	f.Var(&personas, "persona", "reply in a real model's surface form: PERSONA for every model, or MODEL=PERSONA by the request's model field; comma-separated, repeatable (personas: "+strings.Join(llmsim.PersonaNames(), ", ")+")")
	return cmd
}

// personaHelp lists the personas with what each does.
func personaHelp() string {
	var b strings.Builder
	for _, n := range llmsim.PersonaNames() {
		fmt.Fprintf(&b, "  %-18s %s\n", n, llmsim.PersonaDescription(n))
	}
	return b.String()
}
