package cli

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/quorumsql/quorum/pkg/dataset"
	"github.com/quorumsql/quorum/pkg/llm"
	"github.com/quorumsql/quorum/pkg/llmsim"
)

// llmFlags configure the LLM of a command: any OpenAI-compatible endpoint,
// or, when none is configured, quorum's simulator in process.
type llmFlags struct {
	baseURL, apiKey, org, azureVersion, model string
	roleModels                                []string
	temperature                               float64
	maxAttempts                               int
	simSeed                                   uint64
	simGold                                   float64
}

func (f *llmFlags) register(cmd *cobra.Command) {
	fl := cmd.Flags()
	fl.StringVar(&f.baseURL, "llm-base-url", "", "OpenAI-compatible endpoint (env OPENAI_BASE_URL); for Azure, the resource endpoint")
	fl.StringVar(&f.apiKey, "llm-api-key", "", "API key (env OPENAI_API_KEY, or AZURE_OPENAI_API_KEY with --azure-api-version); never printed")
	fl.StringVar(&f.org, "llm-org", "", "OpenAI organization (env OPENAI_ORG_ID)")
	fl.StringVar(&f.azureVersion, "azure-api-version", "", "use Azure OpenAI with this api-version; model names are deployments")
	fl.StringVar(&f.model, "model", "gpt-4o", "default model for every role")
	fl.StringArrayVar(&f.roleModels, "role-model", nil, "model for one role, ROLE=MODEL (roles: generate, explore, link, format, vote); repeatable")
	fl.Float64Var(&f.temperature, "temperature", 1, "sampling temperature (ignored by reasoning models)")
	fl.IntVar(&f.maxAttempts, "llm-attempts", 8, "attempts per LLM call before it is recorded as failed")
	fl.Uint64Var(&f.simSeed, "sim-seed", 1, "seed of the simulated LLM (used only when no LLM is configured)")
	fl.Float64Var(&f.simGold, "sim-p-gold", llmsim.DefaultNoise().Gold, "simulated LLM: probability that a first answer is right")
}

func (f *llmFlags) configured() bool {
	return f.baseURL != "" || f.apiKey != "" || os.Getenv("OPENAI_BASE_URL") != "" || os.Getenv("OPENAI_API_KEY") != "" ||
		(f.azureVersion != "" && os.Getenv("AZURE_OPENAI_API_KEY") != "")
}

// client returns the LLM client, a label for reports, and a stop function.
// limiter, when set, is the shared quota every call waits on.
func (f *llmFlags) client(ds *dataset.Dataset, out io.Writer, limiter llm.Limiter) (*llm.OpenAI, string, func(), error) {
	cfg, label, stop, err := f.config(ds, out)
	if err != nil {
		return nil, "", nil, err
	}
	cfg.Limiter = limiter
	c, err := llm.New(cfg)
	if err != nil {
		stop()
		return nil, "", nil, err
	}
	return c, label, stop, nil
}

// config returns the LLM client configuration, a label for reports and a
// stop function. With no LLM configured it starts llmsim on a loopback port
// over ds and says so; without ds (a cluster worker) that is an error.
func (f *llmFlags) config(ds *dataset.Dataset, out io.Writer) (llm.Config, string, func(), error) {
	temp := f.temperature
	cfg := llm.Config{Default: llm.ModelConfig{Name: f.model, Temperature: &temp}, MaxAttempts: f.maxAttempts,
		Models: map[llm.Role]llm.ModelConfig{}}
	for _, rm := range f.roleModels {
		role, model, ok := strings.Cut(rm, "=")
		if !ok || model == "" {
			return cfg, "", nil, fmt.Errorf("--role-model %q: use ROLE=MODEL, e.g. explore=o3", rm)
		}
		cfg.Models[llm.Role(role)] = llm.ModelConfig{Name: model, Temperature: &temp}
	}
	stop := func() {}
	label := ""
	if f.configured() {
		cfg.BaseURL = firstSet(f.baseURL, os.Getenv("OPENAI_BASE_URL"))
		cfg.APIKey = firstSet(f.apiKey, os.Getenv("OPENAI_API_KEY"))
		cfg.Organization = firstSet(f.org, os.Getenv("OPENAI_ORG_ID"))
		if f.azureVersion != "" {
			cfg.AzureAPIVersion = f.azureVersion
			cfg.APIKey = firstSet(f.apiKey, os.Getenv("AZURE_OPENAI_API_KEY"))
		}
		label = fmt.Sprintf("%s at %s", f.model, firstSet(cfg.BaseURL, "api.openai.com"))
	} else if ds == nil {
		return cfg, "", nil, errors.New("no LLM is configured: pass --llm-base-url (a real OpenAI-compatible endpoint, or a `quorum llmsim` server) and --llm-api-key or OPENAI_API_KEY")
	} else {
		noise := llmsim.DefaultNoise()
		noise.Gold = f.simGold
		sim, err := llmsim.New(llmsim.Config{Dataset: ds, Seed: f.simSeed, Noise: noise})
		if err != nil {
			return cfg, "", nil, err
		}
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return cfg, "", nil, fmt.Errorf("start the simulated LLM: %w", err)
		}
		srv := &http.Server{Handler: sim, ReadHeaderTimeout: 10 * time.Second}
		go func() {
			if err := srv.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
				fmt.Fprintln(out, "llmsim:", err)
			}
		}()
		stop = func() {
			ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
			defer cancel()
			_ = srv.Shutdown(ctx)
		}
		cfg.BaseURL, cfg.APIKey = "http://"+ln.Addr().String()+"/v1", "llmsim"
		label = fmt.Sprintf("SIMULATED LLM (quorum llmsim, seed %d, p-gold %.2f) — not a real model", f.simSeed, f.simGold)
		fmt.Fprintln(out, "No LLM is configured (--llm-base-url / OPENAI_API_KEY): using quorum's SIMULATED LLM, llmsim.")
		fmt.Fprintln(out, "It answers from the dataset's gold SQL with noise; its accuracy says nothing about a real model.")
	}
	return cfg, label, stop, nil
}

func firstSet(vals ...string) string {
	for _, v := range vals {
		if v != "" {
			return v
		}
	}
	return ""
}
