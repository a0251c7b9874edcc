package cli

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"math"
	"net"
	"net/http"
	"net/url"
	"os"
	"regexp"
	"slices"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/cobra"
	"sigs.k8s.io/yaml"

	"github.com/quorumsql/quorum/internal/redact"
	"github.com/quorumsql/quorum/internal/service"
	"github.com/quorumsql/quorum/pkg/dataset"
	"github.com/quorumsql/quorum/pkg/llm"
	"github.com/quorumsql/quorum/pkg/llmsim"
)

// llmFlags configure the LLM of a command: any OpenAI-compatible endpoint,
// or, when none is configured, quorum's simulator in process; roles may go
// to endpoints of their own (--role-endpoint, --llm-config).
type llmFlags struct {
	baseURL, apiKey, org, azureVersion, model string
	roleModels, roleEndpoints, roleKeys       []string
	prices                                    []string
	configFile                                string
	temperature                               float64
	maxAttempts                               int
	headerTimeout, stallTimeout               time.Duration
	attemptTimeout, callTimeout               time.Duration
	simSeed                                   uint64
	simGold                                   float64
	simPersonas                               llmsim.Personas
	simDifficulty                             string
	// getenv reads the environment; nil means os.Getenv (tests set it).
	getenv func(string) string
	// stderr is the command's error stream (warnings); keyWarned is set
	// once --llm-api-key was warned about.
	stderr    func() io.Writer
	keyWarned bool
}

func (f *llmFlags) register(cmd *cobra.Command) {
	f.stderr = cmd.ErrOrStderr
	fl := cmd.Flags()
	fl.StringVar(&f.baseURL, "llm-base-url", "", "OpenAI-compatible endpoint (env OPENAI_BASE_URL); for Azure, the resource endpoint")
	fl.StringVar(&f.apiKey, "llm-api-key", "", "API key; prefer the environment variable OPENAI_API_KEY (or AZURE_OPENAI_API_KEY with --azure-api-version): a flag's value is visible to every local user in ps")
	fl.StringVar(&f.org, "llm-org", "", "OpenAI organization (env OPENAI_ORG_ID)")
	fl.StringVar(&f.azureVersion, "azure-api-version", "", "use Azure OpenAI with this api-version; model names are deployments")
	fl.StringVar(&f.model, "model", "gpt-4o", "default model for every role")
	fl.StringArrayVar(&f.roleModels, "role-model", nil, "model for one role, ROLE=MODEL (roles: generate, explore, link, format, vote, or any an agent uses); repeatable")
	fl.StringArrayVar(&f.roleEndpoints, "role-endpoint", nil, "send one role's calls elsewhere: ROLE=URL (an OpenAI-compatible base URL; it gets no API key unless --role-api-key names one) or ROLE=NAME (an endpoint of --llm-config); repeatable")
	fl.StringArrayVar(&f.roleKeys, "role-api-key", nil, "ROLE=ENV_VAR: the environment variable holding the API key for ROLE's --role-endpoint URL (name the variable, never the key); repeatable")
	fl.StringVar(&f.configFile, "llm-config", "", "YAML or JSON file of named endpoints (name, base_url, api_key_env, organization, azure_api_version, headers, rpm, tpm, stream: false for a server that cannot stream) and roles (ROLE: endpoint, model, temperature, max_tokens); an endpoint named default is the default endpoint; flags override the file; rpm/tpm are enforced cluster-wide where a Redis limiter runs")
	fl.StringArrayVar(&f.prices, "llm-price", nil, "price of a model per million tokens, [ENDPOINT/]MODEL=INPUT,CACHED_INPUT,OUTPUT[,REASONING] (MODEL * for every model of the endpoint; ENDPOINT default when absent); overrides --llm-config's prices and the built-in table of public models; the simulated LLM costs 0 unless priced; repeatable")
	fl.Float64Var(&f.temperature, "temperature", 1, "sampling temperature (ignored by reasoning models)")
	fl.IntVar(&f.maxAttempts, "llm-attempts", 8, "attempts per LLM call before it is recorded as failed (a 429 naming its retry delay spends none: the call waits as asked, up to 100 times within its time limit)")
	fl.DurationVar(&f.headerTimeout, "llm-header-timeout", llm.DefaultHeaderTimeout, "abandon an attempt of an LLM call whose endpoint sends no response headers within this long (calls are streamed: a live endpoint answers them at once, before the model writes); a call to an endpoint that answers nothing fails after 3 times this; calls a user waits for wait at most 5s")
	fl.DurationVar(&f.stallTimeout, "llm-stall-timeout", llm.DefaultStallTimeout, "abandon an attempt of an LLM call whose response stream stays silent this long (a reasoning model may think for minutes without a token)")
	fl.DurationVar(&f.attemptTimeout, "llm-attempt-timeout", llm.DefaultAttemptTimeout, "abandon one HTTP attempt of an LLM call after this long, however live its stream: the longest generation accepted (the only bound for an endpoint that does not stream)")
	fl.DurationVar(&f.callTimeout, "llm-call-timeout", llm.DefaultCallTimeout, fmt.Sprintf("start no attempt of an LLM call after this long in all, attempts and the waits between them (quota waits not counted; a stream already flowing is not cut); calls a user waits for (serve, ask) get at most %s and 3 attempts", llm.DefaultInteractiveCallTimeout))
	fl.Uint64Var(&f.simSeed, "sim-seed", 1, "seed of the simulated LLM (used only when no LLM is configured)")
	fl.Float64Var(&f.simGold, "sim-p-gold", llmsim.DefaultNoise().Gold, "simulated LLM: probability that a first answer is right")
	fl.StringVar(&f.simDifficulty, "sim-difficulty", "", "simulated LLM: a mix of easy, medium and hard questions, easy=W,medium=W,hard=W or default (unset: one uniform skill)")
	fl.Var(&f.simPersonas, "sim-persona", "simulated LLM: reply in a real model's surface form, PERSONA or MODEL=PERSONA by model name; repeatable (see quorum llmsim --help)")
}

// warnKeyFlag says, once and without the key, that --llm-api-key shows the
// key to every local user (ps, /proc/PID/cmdline).
func (f *llmFlags) warnKeyFlag() {
	if f.apiKey == "" || f.keyWarned {
		return
	}
	f.keyWarned = true
	w := io.Writer(os.Stderr)
	if f.stderr != nil {
		w = f.stderr()
	}
	env := "OPENAI_API_KEY"
	if f.azureVersion != "" {
		env = "AZURE_OPENAI_API_KEY"
	}
	fmt.Fprintf(w, "warning: --llm-api-key puts the key on the command line, where other users of this machine can read it (ps); export %s instead and drop the flag\n", env)
}

func (f *llmFlags) env(key string) string {
	if f.getenv != nil {
		return f.getenv(key)
	}
	return os.Getenv(key)
}

func (f *llmFlags) configured() bool {
	return f.baseURL != "" || f.apiKey != "" || f.env("OPENAI_BASE_URL") != "" || f.env("OPENAI_API_KEY") != "" ||
		(f.azureVersion != "" && f.env("AZURE_OPENAI_API_KEY") != "")
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
// stop function. With no default endpoint configured it starts llmsim on a
// loopback port over ds and says so; without ds (a cluster worker) that is
// an error.
func (f *llmFlags) config(ds *dataset.Dataset, out io.Writer) (llm.Config, string, func(), error) {
	f.warnKeyFlag()
	temp := f.temperature
	cfg := llm.Config{Default: llm.ModelConfig{Name: f.model, Temperature: &temp}, MaxAttempts: f.maxAttempts,
		HeaderTimeout: f.headerTimeout, StallTimeout: f.stallTimeout, AttemptTimeout: f.attemptTimeout, CallTimeout: f.callTimeout,
		Models: map[llm.Role]llm.ModelConfig{}}
	for _, d := range []struct {
		flag string
		v    time.Duration
	}{{"llm-header-timeout", f.headerTimeout}, {"llm-stall-timeout", f.stallTimeout}, {"llm-attempt-timeout", f.attemptTimeout}, {"llm-call-timeout", f.callTimeout}} {
		if d.v < 0 {
			return cfg, "", nil, fmt.Errorf("--%s %s: must not be negative (0 = the default)", d.flag, d.v)
		}
	}
	fileDefault := false
	var file *llmConfig
	if f.configFile != "" {
		var err error
		if file, err = loadLLMConfig(f.configFile, f.env); err != nil {
			return cfg, "", nil, err
		}
		for _, e := range file.Endpoints {
			if e.Name == llm.DefaultEndpoint {
				cfg.BaseURL, cfg.APIKey, cfg.Organization, cfg.AzureAPIVersion, cfg.Headers, cfg.Quota, cfg.NoStream, cfg.Prices, cfg.CachedOutsideTPM, cfg.CacheMarkers, cfg.WarmUp =
					e.BaseURL, e.APIKey, e.Organization, e.AzureAPIVersion, e.Headers, e.Quota, e.NoStream, e.Prices, e.CachedOutsideTPM, e.CacheMarkers, e.WarmUp
				fileDefault = true
				continue
			}
			cfg.Endpoints = append(cfg.Endpoints, e)
		}
		for role, m := range file.Roles {
			if m.Name != "" && m.Temperature == nil {
				m.Temperature = &temp
			}
			cfg.Models[role] = m
		}
	}
	if err := f.applyRoleFlags(&cfg, &temp); err != nil {
		return cfg, "", nil, err
	}
	if file != nil {
		cfg.Default = file.routes(cfg.Default, nil)
		for role, m := range cfg.Models {
			if m.Name != "" || len(file.fallbacks[role]) > 0 {
				cfg.Models[role] = file.routes(m, file.fallbacks[role])
			}
		}
	}
	stop := func() {}
	label := ""
	if f.configured() || fileDefault {
		// Flags, then the file's default endpoint, then the environment.
		if !fileDefault {
			cfg.BaseURL = f.env("OPENAI_BASE_URL")
			cfg.APIKey = f.env("OPENAI_API_KEY")
			cfg.Organization = f.env("OPENAI_ORG_ID")
			if f.azureVersion != "" {
				cfg.APIKey = f.env("AZURE_OPENAI_API_KEY")
			}
		}
		cfg.BaseURL = firstSet(f.baseURL, cfg.BaseURL)
		cfg.APIKey = firstSet(f.apiKey, cfg.APIKey)
		cfg.Organization = firstSet(f.org, cfg.Organization)
		cfg.AzureAPIVersion = firstSet(f.azureVersion, cfg.AzureAPIVersion)
		label = fmt.Sprintf("%s at %s", f.model, firstSet(redactURL(cfg.BaseURL), "api.openai.com"))
	} else if ds == nil {
		return cfg, "", nil, errors.New("no LLM is configured: pass --llm-base-url (a real OpenAI-compatible endpoint, or a `quorum llmsim` server) and --llm-api-key or OPENAI_API_KEY, or an endpoint named default in --llm-config")
	} else {
		noise := llmsim.DefaultNoise()
		noise.Gold = f.simGold
		mix, err := llmsim.ParseDifficulty(f.simDifficulty)
		if err != nil {
			return cfg, "", nil, fmt.Errorf("--sim-difficulty: %w", err)
		}
		sim, err := llmsim.New(llmsim.Config{Dataset: ds, Seed: f.simSeed, Noise: noise, Personas: f.simPersonas, Difficulty: mix})
		if err != nil {
			return cfg, "", nil, err
		}
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return cfg, "", nil, fmt.Errorf("start the simulated LLM: %w", err)
		}
		h := &service.HTTP{Server: &http.Server{Handler: sim, ReadHeaderTimeout: 10 * time.Second}, Listener: ln}
		_ = h.Start(context.Background()) // a new component starts
		stop = func() {
			h.Stop()
			if err := h.Err(); err != nil {
				fmt.Fprintln(out, "llmsim:", err)
			}
		}
		cfg.BaseURL, cfg.APIKey = "http://"+ln.Addr().String()+"/v1", "llmsim"
		// Simulated calls cost nothing, whatever model they name, unless
		// --llm-price prices them.
		cfg.Prices = llm.Prices{llm.AnyModel: {}}
		// The persona and difficulty change what the simulator writes: a
		// run's label (run.json, the report, quorum compare) names them.
		var more string
		if p := f.simPersonas.String(); p != "" {
			more += ", persona " + p
		}
		if f.simDifficulty != "" {
			more += ", difficulty " + f.simDifficulty
		}
		label = fmt.Sprintf("SIMULATED LLM (quorum llmsim, seed %d, p-gold %.2f%s) — not a real model", f.simSeed, f.simGold, more)
		fmt.Fprintln(out, "No LLM is configured (--llm-base-url / OPENAI_API_KEY): using quorum's SIMULATED LLM, llmsim.")
		fmt.Fprintln(out, "It answers from the dataset's gold SQL with noise; its accuracy says nothing about a real model.")
	}
	if err := f.applyPrices(&cfg); err != nil {
		stop()
		return cfg, "", nil, err
	}
	return cfg, label + roleLabel(cfg), stop, nil
}

// applyPrices applies --llm-price over the endpoints' prices.
func (f *llmFlags) applyPrices(cfg *llm.Config) error {
	for _, v := range f.prices {
		bad := func(why string) error {
			return fmt.Errorf("--llm-price %q: %s; use [ENDPOINT/]MODEL=INPUT,CACHED_INPUT,OUTPUT[,REASONING] in money per million tokens, e.g. --llm-price gpt-4o=2.5,1.25,10", v, why)
		}
		key, nums, ok := strings.Cut(v, "=")
		if !ok || strings.TrimSpace(key) == "" {
			return bad("no MODEL=")
		}
		ep, model := llm.DefaultEndpoint, strings.TrimSpace(key)
		if e, m, ok := strings.Cut(model, "/"); ok && e != "" && m != "" {
			ep, model = e, m
		}
		parts := strings.Split(nums, ",")
		if len(parts) != 3 && len(parts) != 4 {
			return bad(fmt.Sprintf("%d prices, want 3 or 4", len(parts)))
		}
		var vals [4]float64
		for i, p := range parts {
			x, err := strconv.ParseFloat(strings.TrimSpace(p), 64)
			if err != nil || x < 0 || math.IsInf(x, 0) || math.IsNaN(x) {
				return bad(fmt.Sprintf("price %q is not a non-negative number", p))
			}
			vals[i] = x
		}
		price := llm.Price{Input: vals[0], CachedInput: vals[1], Output: vals[2], Reasoning: vals[3]}
		set := func(ps *llm.Prices) {
			if *ps == nil {
				*ps = llm.Prices{}
			}
			(*ps)[model] = price
		}
		if ep == llm.DefaultEndpoint {
			set(&cfg.Prices)
			continue
		}
		i := slices.IndexFunc(cfg.Endpoints, func(e llm.Endpoint) bool { return e.Name == ep })
		if i < 0 {
			return bad(fmt.Sprintf("no endpoint %q is configured", ep))
		}
		set(&cfg.Endpoints[i].Prices)
	}
	return nil
}

// applyRoleFlags applies --role-model, --role-endpoint and --role-api-key
// over the file's roles.
func (f *llmFlags) applyRoleFlags(cfg *llm.Config, temp *float64) error {
	role := func(flag, v string) (llm.Role, string, error) {
		r, val, ok := strings.Cut(v, "=")
		if ok && strings.TrimSpace(r) != "" && val != "" {
			return llm.Role(strings.TrimSpace(r)), val, nil
		}
		// The value is shown only where it cannot hold a secret.
		shown := fmt.Sprintf(" %q", v)
		switch {
		case flag == "role-api-key":
			shown = ""
		case strings.Contains(val, "://"):
			shown = fmt.Sprintf(" %q", r+"="+redactURL(val))
		}
		example := map[string]string{"role-model": "explore=o3", "role-endpoint": "explore=http://127.0.0.1:8000/v1", "role-api-key": "explore=EXPLORE_API_KEY"}[flag]
		return "", "", fmt.Errorf("--%s%s: use ROLE=VALUE with a non-empty role and value, e.g. --%s %s", flag, shown, flag, example)
	}
	for _, v := range f.roleModels {
		r, model, err := role("role-model", v)
		if err != nil {
			return err
		}
		m := cfg.Models[r]
		m.Name = model
		if m.Temperature == nil {
			m.Temperature = temp
		}
		cfg.Models[r] = m
	}
	keys := map[llm.Role]string{}
	for _, v := range f.roleKeys {
		r, env, err := role("role-api-key", v)
		if err != nil {
			return err
		}
		if !envName.MatchString(env) {
			return fmt.Errorf("--role-api-key for role %s: the value is not an environment variable name; put the key in a variable and pass ROLE=VARIABLE", r)
		}
		if f.env(env) == "" {
			return fmt.Errorf("--role-api-key %s=%s: %s is not set in the environment; export it with the key of that role's endpoint", r, env, env)
		}
		keys[r] = env
	}
	byURL := map[string]string{} // URL and key variable -> endpoint name
	for _, v := range f.roleEndpoints {
		r, target, err := role("role-endpoint", v)
		if err != nil {
			return err
		}
		name := target
		if strings.Contains(target, "://") {
			if err := checkBaseURL(target); err != nil {
				return fmt.Errorf("--role-endpoint %s=%s: %w", r, redactURL(target), err)
			}
			// Roles sharing a URL and key share the endpoint, so its quota
			// is one account's.
			id := target + "\x00" + keys[r]
			if name = byURL[id]; name == "" {
				name = uniqueName(cfg, urlName(target))
				byURL[id] = name
				cfg.Endpoints = append(cfg.Endpoints, llm.Endpoint{Name: name, BaseURL: target, APIKey: f.env(keys[r])})
			}
		} else if !hasEndpoint(cfg, name) {
			return fmt.Errorf("--role-endpoint %s=%s: no endpoint %q is defined; pass a URL (http://host:port/v1) or a name from --llm-config (%s)", r, target, target, endpointNames(cfg))
		} else if keys[r] != "" {
			return fmt.Errorf("--role-api-key %s: role %s goes to the --llm-config endpoint %s; set api_key_env there instead", r, r, name)
		}
		if name == llm.DefaultEndpoint {
			name = ""
		}
		m := cfg.Models[r]
		m.Endpoint = name
		cfg.Models[r] = m
	}
	for r := range keys {
		if !slices.ContainsFunc(f.roleEndpoints, func(v string) bool { return strings.HasPrefix(v, string(r)+"=") }) {
			return fmt.Errorf("--role-api-key %s: role %s has no --role-endpoint URL to send the key to", r, r)
		}
	}
	return nil
}

func hasEndpoint(cfg *llm.Config, name string) bool {
	return name == llm.DefaultEndpoint || slices.ContainsFunc(cfg.Endpoints, func(e llm.Endpoint) bool { return e.Name == name })
}

func endpointNames(cfg *llm.Config) string {
	names := []string{llm.DefaultEndpoint}
	for _, e := range cfg.Endpoints {
		names = append(names, e.Name)
	}
	return strings.Join(names, ", ")
}

var nonName = regexp.MustCompile(`[^A-Za-z0-9._-]+`)

// urlName names an endpoint after its host and port ("127.0.0.1-8001").
func urlName(raw string) string {
	u, err := url.Parse(raw)
	if err != nil || u.Host == "" {
		return "endpoint"
	}
	return strings.Trim(nonName.ReplaceAllString(strings.ReplaceAll(u.Host, ":", "-"), "-"), "-._")
}

func uniqueName(cfg *llm.Config, base string) string {
	if base == "" || base == llm.DefaultEndpoint {
		base = "endpoint"
	}
	name := base
	for i := 2; hasEndpoint(cfg, name); i++ {
		name = fmt.Sprintf("%s-%d", base, i)
	}
	return name
}

// roleLabel describes the roles that differ from the default, without keys.
func roleLabel(cfg llm.Config) string {
	roles := make([]string, 0, len(cfg.Models))
	for r := range cfg.Models {
		roles = append(roles, string(r))
	}
	sort.Strings(roles)
	urls := map[string]string{}
	for _, e := range cfg.Endpoints {
		urls[e.Name] = redactURL(e.BaseURL)
	}
	var parts []string
	for _, r := range roles {
		m := cfg.Models[llm.Role(r)]
		model := firstSet(m.Name, cfg.Default.Name)
		if m.Endpoint == "" {
			parts = append(parts, fmt.Sprintf("%s=%s", r, model))
			continue
		}
		parts = append(parts, fmt.Sprintf("%s=%s at %s (%s)", r, model, m.Endpoint, urls[m.Endpoint]))
	}
	if len(parts) == 0 {
		return ""
	}
	return "; roles: " + strings.Join(parts, ", ")
}

// roleModel resolves a role as llm.OpenAI.Model does: the model its calls
// ask for, the endpoint they go to and that endpoint's URL without
// credentials.
func roleModel(cfg llm.Config, role llm.Role) (model, endpoint, url string) {
	m, ok := cfg.Models[role]
	model, endpoint = cfg.Default.Name, cfg.Default.Endpoint
	if ok {
		model = firstSet(m.Name, model)
		endpoint = firstSet(m.Endpoint, endpoint)
		if m.Name != "" {
			endpoint = m.Endpoint
		}
	}
	if endpoint == "" || endpoint == llm.DefaultEndpoint {
		return model, llm.DefaultEndpoint, firstSet(redactURL(cfg.BaseURL), "https://api.openai.com/v1")
	}
	for _, e := range cfg.Endpoints {
		if e.Name == endpoint {
			return model, endpoint, redactURL(e.BaseURL)
		}
	}
	return model, endpoint, ""
}

// redactURL shows where a URL points without credentials: no user info,
// query or fragment (keys sometimes travel there).
func redactURL(raw string) string { return redact.URL(raw) }

func checkBaseURL(raw string) error {
	u, err := url.Parse(raw)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return errors.New("not an http(s) URL with a host, e.g. https://api.example.com/v1")
	}
	return nil
}

var envName = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*$`)

// llmConfigFile is the --llm-config file.
type llmConfigFile struct {
	Endpoints []llmConfigEndpoint      `json:"endpoints"`
	Roles     map[string]llmConfigRole `json:"roles"`
	// Models are aliases: a role's model (or --model) naming one is
	// served by its deployments, then its fallbacks.
	Models map[string]llmConfigModel `json:"models,omitempty"`
}

type llmConfigModel struct {
	Deployments []llmConfigDeployment `json:"deployments,omitempty"`
	Fallbacks   []string              `json:"fallbacks,omitempty"`
}

type llmConfigDeployment struct {
	Endpoint string `json:"endpoint"`
	// Model is the model's name there (an Azure deployment name).
	Model    string  `json:"model,omitempty"`
	RPM      float64 `json:"rpm,omitempty"`
	TPM      float64 `json:"tpm,omitempty"`
	Weight   float64 `json:"weight,omitempty"`
	Priority int     `json:"priority,omitempty"`
}

type llmConfigEndpoint struct {
	Name    string `json:"name"`
	BaseURL string `json:"base_url"`
	// APIKeyEnv names the environment variable holding the key, so the
	// key itself is never in the file, a log or a label.
	APIKeyEnv       string            `json:"api_key_env,omitempty"`
	Organization    string            `json:"organization,omitempty"`
	AzureAPIVersion string            `json:"azure_api_version,omitempty"`
	Headers         map[string]string `json:"headers,omitempty"`
	RPM             float64           `json:"rpm,omitempty"`
	TPM             float64           `json:"tpm,omitempty"`
	// Stream false sends the endpoint's calls non-streamed (see
	// llm.Endpoint.NoStream); absent or true streams them.
	Stream *bool `json:"stream,omitempty"`
	// Prices by model name ("*": every other model) override the
	// built-in table.
	Prices llm.Prices `json:"prices,omitempty"`
	// CachedOutsideTPM: the provider leaves cached prompt tokens out of
	// its TPM limit (see llm.Endpoint.CachedOutsideTPM).
	CachedOutsideTPM bool `json:"cached_outside_tpm,omitempty"`
	// CacheMarkers: the provider caches only the prompt parts a request
	// marks (see llm.Endpoint.CacheMarkers).
	CacheMarkers bool `json:"cache_markers,omitempty"`
	// WarmUp sends the first call of those sharing a long prompt start
	// ahead of the others (see llm.Endpoint.WarmUp).
	WarmUp bool `json:"warm_up,omitempty"`
}

type llmConfigRole struct {
	Endpoint    string   `json:"endpoint,omitempty"`
	Model       string   `json:"model,omitempty"`
	Temperature *float64 `json:"temperature,omitempty"`
	MaxTokens   int      `json:"max_tokens,omitempty"`
	// Deployments and Fallbacks as a model alias has them.
	Deployments []llmConfigDeployment `json:"deployments,omitempty"`
	Fallbacks   []string              `json:"fallbacks,omitempty"`
}

// llmConfig is a checked --llm-config file with the keys read.
type llmConfig struct {
	Endpoints []llm.Endpoint
	Roles     map[llm.Role]llm.ModelConfig
	// Models are the aliases, their fallbacks resolved by routes.
	Models map[string]modelAlias
	// fallbacks are the roles' fallback names.
	fallbacks map[llm.Role][]string
}

type modelAlias struct {
	deployments []llm.Deployment
	fallbacks   []string
}

// routes gives mc the deployments and fallbacks its alias or its role
// (fallbacks) names: a fallback naming an alias takes its deployments,
// any other name is that model at mc's endpoint.
func (c *llmConfig) routes(mc llm.ModelConfig, fallbacks []string) llm.ModelConfig {
	a, ok := c.Models[mc.Name]
	if ok && len(mc.Deployments) == 0 {
		mc.Deployments = a.deployments
	}
	if len(fallbacks) == 0 {
		fallbacks = a.fallbacks
	}
	mc.Fallbacks = nil
	for _, name := range fallbacks {
		fb := llm.ModelConfig{Name: name, Endpoint: mc.Endpoint}
		if fa, ok := c.Models[name]; ok {
			fb.Deployments = fa.deployments
		}
		mc.Fallbacks = append(mc.Fallbacks, fb)
	}
	return mc
}

// loadLLMConfig reads and checks an --llm-config file; unknown keys are
// errors, so a misspelt rpm does not silently mean "unlimited".
func loadLLMConfig(path string, getenv func(string) string) (*llmConfig, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("--llm-config: %w", err)
	}
	var file llmConfigFile
	if err := yaml.UnmarshalStrict(b, &file); err != nil {
		msg := err.Error()
		if i := strings.Index(msg, "unknown field"); i >= 0 {
			msg = msg[i:] // without the decoder's layers of prefixes
		}
		return nil, fmt.Errorf("--llm-config %s: %s (known keys: endpoints: [name, base_url, api_key_env, organization, azure_api_version, headers, rpm, tpm, stream, prices: {MODEL: input, cached_input, output, reasoning}, cached_outside_tpm, cache_markers, warm_up], roles: {ROLE: endpoint, model, temperature, max_tokens, deployments, fallbacks}, models: {MODEL: deployments: [endpoint, model, rpm, tpm, weight, priority], fallbacks: [MODEL]})", path, msg)
	}
	fail := func(format string, args ...any) (*llmConfig, error) {
		return nil, fmt.Errorf("--llm-config %s: "+format, append([]any{path}, args...)...)
	}
	out := &llmConfig{Roles: map[llm.Role]llm.ModelConfig{}}
	names := map[string]bool{}
	for i, e := range file.Endpoints {
		switch {
		case e.Name == "":
			return fail("endpoint %d has no name", i+1)
		case !nameOK.MatchString(e.Name):
			return fail("endpoint name %q: use letters, digits, '.', '_' and '-'", e.Name)
		case names[e.Name]:
			return fail("endpoint %q is defined twice", e.Name)
		case e.BaseURL == "":
			return fail("endpoint %q has no base_url; give its OpenAI-compatible URL, e.g. https://api.openai.com/v1", e.Name)
		case e.RPM < 0 || e.TPM < 0:
			return fail("endpoint %q: rpm and tpm must not be negative (0 or absent = no quota of its own)", e.Name)
		}
		for model, p := range e.Prices {
			if p.Input < 0 || p.CachedInput < 0 || p.Output < 0 || p.Reasoning < 0 {
				return fail("endpoint %q: the prices of %s must not be negative", e.Name, model)
			}
		}
		if err := checkBaseURL(e.BaseURL); err != nil {
			return fail("endpoint %q: base_url %s: %v", e.Name, redactURL(e.BaseURL), err)
		}
		names[e.Name] = true
		ep := llm.Endpoint{Name: e.Name, BaseURL: e.BaseURL, Organization: e.Organization, AzureAPIVersion: e.AzureAPIVersion,
			Headers: e.Headers, Quota: llm.Quota{RequestsPerMinute: e.RPM, TokensPerMinute: e.TPM}, NoStream: e.Stream != nil && !*e.Stream,
			Prices: e.Prices, CachedOutsideTPM: e.CachedOutsideTPM, CacheMarkers: e.CacheMarkers, WarmUp: e.WarmUp}
		if e.APIKeyEnv != "" {
			if !envName.MatchString(e.APIKeyEnv) {
				// Not echoed: it may be the key itself.
				return fail("endpoint %q: api_key_env is not an environment variable name; put the key in a variable and name the variable", e.Name)
			}
			if ep.APIKey = getenv(e.APIKeyEnv); ep.APIKey == "" {
				return fail("endpoint %q: api_key_env %s is not set in the environment; export %s, or drop api_key_env if the endpoint needs no key", e.Name, e.APIKeyEnv, e.APIKeyEnv)
			}
		}
		out.Endpoints = append(out.Endpoints, ep)
	}
	deployments := func(what string, ds []llmConfigDeployment) ([]llm.Deployment, error) {
		var out []llm.Deployment
		for i, d := range ds {
			switch {
			case d.Endpoint == "" || d.Endpoint != llm.DefaultEndpoint && !names[d.Endpoint]:
				return nil, fmt.Errorf("%s: deployment %d uses endpoint %q, which the file does not define (defined: %s)", what, i+1, d.Endpoint, strings.Join(slices.Sorted(maps.Keys(names)), ", "))
			case d.RPM < 0 || d.TPM < 0 || d.Weight < 0:
				return nil, fmt.Errorf("%s: deployment %d at %s: rpm, tpm and weight must not be negative", what, i+1, d.Endpoint)
			}
			out = append(out, llm.Deployment{Endpoint: d.Endpoint, Name: d.Model, Quota: llm.Quota{RequestsPerMinute: d.RPM, TokensPerMinute: d.TPM},
				Weight: d.Weight, Priority: d.Priority})
		}
		return out, nil
	}
	out.Models = map[string]modelAlias{}
	out.fallbacks = map[llm.Role][]string{}
	for name, m := range file.Models {
		ds, err := deployments("model "+name, m.Deployments)
		if err != nil {
			return fail("%v", err)
		}
		out.Models[name] = modelAlias{deployments: ds, fallbacks: m.Fallbacks}
	}
	for r, rc := range file.Roles {
		switch {
		case strings.TrimSpace(r) == "":
			return fail("roles: a role name is empty")
		case rc.Endpoint != "" && rc.Endpoint != llm.DefaultEndpoint && !names[rc.Endpoint]:
			return fail("role %q uses endpoint %q, which the file does not define (defined: %s)", r, rc.Endpoint, strings.Join(slices.Sorted(maps.Keys(names)), ", "))
		case rc.Temperature != nil && (*rc.Temperature < 0 || *rc.Temperature > 2):
			return fail("role %q: temperature %v is outside [0, 2]", r, *rc.Temperature)
		case rc.MaxTokens < 0:
			return fail("role %q: max_tokens %d must not be negative", r, rc.MaxTokens)
		}
		ep := rc.Endpoint
		if ep == llm.DefaultEndpoint {
			ep = ""
		}
		ds, err := deployments("role "+r, rc.Deployments)
		if err != nil {
			return fail("%v", err)
		}
		out.Roles[llm.Role(r)] = llm.ModelConfig{Name: rc.Model, Endpoint: ep, Temperature: rc.Temperature, MaxCompletionTokens: rc.MaxTokens, Deployments: ds}
		out.fallbacks[llm.Role(r)] = rc.Fallbacks
	}
	return out, nil
}

var nameOK = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9._-]*$`)

func firstSet(vals ...string) string {
	for _, v := range vals {
		if v != "" {
			return v
		}
	}
	return ""
}

// simulatedLabel names the simulator in the run's LLM label when the
// preflight found one behind a configured endpoint.
func simulatedLabel(label string, simulated bool, baseURL string) string {
	if simulated && !strings.Contains(label, "SIMULATED") {
		return "SIMULATED LLM (a quorum llmsim server at " + redactURL(baseURL) + ") — not a real model"
	}
	return label
}

// preflight checks, before any work, that every configured LLM endpoint
// answers and accepts its key: a run against an endpoint where nothing
// listens would otherwise spend minutes per example retrying. It reports
// whether the default endpoint says it is quorum's simulator, so that a
// standalone llmsim is labelled as one.
func preflight(ctx context.Context, cfg llm.Config) (simulated bool, err error) {
	eps := append([]llm.Endpoint{{Name: llm.DefaultEndpoint, BaseURL: cfg.BaseURL, APIKey: cfg.APIKey, Headers: cfg.Headers,
		AzureAPIVersion: cfg.AzureAPIVersion}}, cfg.Endpoints...)
	client := &http.Client{Timeout: 10 * time.Second}
	if t, ok := http.DefaultTransport.(*http.Transport); ok {
		// Connections of its own, closed when it is done: nothing of the
		// check stays behind in the process's shared pool.
		client.Transport = t.Clone()
		defer client.CloseIdleConnections()
	}
	for _, ep := range eps {
		base := strings.TrimRight(firstSet(ep.BaseURL, "https://api.openai.com/v1"), "/")
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, base+"/models", nil)
		if err != nil {
			return false, fmt.Errorf("LLM endpoint %s (%s): %w", ep.Name, redactURL(base), err)
		}
		if ep.APIKey != "" {
			req.Header.Set("Authorization", "Bearer "+ep.APIKey)
			req.Header.Set("api-key", ep.APIKey)
		}
		for k, v := range ep.Headers {
			req.Header.Set(k, v)
		}
		resp, err := client.Do(req)
		if err != nil {
			return false, fmt.Errorf("LLM endpoint %s at %s is unreachable: %w (check --llm-base-url / --llm-config, or leave them unset to use the simulated LLM)", ep.Name, redactURL(base), err)
		}
		body, _ := io.ReadAll(io.LimitReader(resp.Body, 64<<10))
		resp.Body.Close()
		if resp.StatusCode == http.StatusUnauthorized || resp.StatusCode == http.StatusForbidden {
			return false, fmt.Errorf("LLM endpoint %s at %s refused the API key (HTTP %d): check --llm-api-key / OPENAI_API_KEY", ep.Name, redactURL(base), resp.StatusCode)
		}
		sim := strings.Contains(string(body), "simulator")
		if ep.Name == llm.DefaultEndpoint && sim {
			simulated = true
		}
		// The simulator answers any model name, and Azure lists models,
		// not the deployments that stand in for them.
		if resp.StatusCode == http.StatusOK && !sim && ep.AzureAPIVersion == "" {
			if err := servesModels(ep, base, body, modelsOn(cfg, ep.Name)); err != nil {
				return false, err
			}
		}
	}
	return simulated, nil
}

// modelsOn lists the model names the configuration sends to an endpoint.
func modelsOn(cfg llm.Config, endpoint string) []string {
	on := func(e string) bool {
		return e == endpoint || (e == "" && endpoint == llm.DefaultEndpoint)
	}
	seen := map[string]bool{}
	var out []string
	add := func(m llm.ModelConfig) {
		name := firstSet(m.Name, cfg.Default.Name)
		if on(m.Endpoint) && name != "" && !seen[name] {
			seen[name] = true
			out = append(out, name)
		}
	}
	add(cfg.Default)
	for _, m := range cfg.Models {
		add(m)
	}
	sort.Strings(out)
	return out
}

// servesModels checks an OpenAI-style model list: a model the run would
// ask for that the endpoint does not list would fail every call. A body
// that is not such a list (a gateway's own format) is not judged.
func servesModels(ep llm.Endpoint, base string, body []byte, want []string) error {
	var list struct {
		Data []struct {
			ID string `json:"id"`
		} `json:"data"`
	}
	if json.Unmarshal(body, &list) != nil || len(list.Data) == 0 {
		return nil
	}
	served := map[string]bool{}
	var ids []string
	for _, m := range list.Data {
		served[m.ID] = true
		ids = append(ids, m.ID)
	}
	for _, m := range want {
		if !served[m] {
			if len(ids) > 10 {
				ids = append(ids[:10], "…")
			}
			return fmt.Errorf("LLM endpoint %s at %s does not serve model %q (it lists: %s): set --model, or the role's model, to one it serves",
				ep.Name, redactURL(base), m, strings.Join(ids, ", "))
		}
	}
	return nil
}
