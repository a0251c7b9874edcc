package cli

import (
	"errors"
	"fmt"
	"io"
	"sort"
	"time"

	"github.com/spf13/cobra"

	"github.com/quorumsql/quorum/internal/ratelimit"
)

// llmScope is the scope every role's LLM budget uses (internal/runtime/cluster).
const llmScope = "llm"

func newLimitsCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "limits",
		Short: "Change an LLM model's quota on a running cluster",
		Long: `limits sets an LLM model's requests or tokens per minute for every process
on the cluster's Redis, without a restart: a provider lowered a tier, another
team shares the quota, the configured number was wrong. A limit set replaces
the configured one (--llm-rpm, --llm-tpm, the endpoint's or the model's
quota), field by field; every worker reads it within ` + ratelimit.LimitsRefresh.String() + `. Each change
is logged; limits show lists the limits set and the changes.`,
		Example: `  quorum limits set --model gpt-4o --llm-rpm 1500          # --redis-url or QUORUM_REDIS_URL
  quorum limits set --model gpt-4o --endpoint azure --llm-tpm 400000
  quorum limits show --state-dir out/run-1/.state        # the Redis a quorum run keeps
  quorum limits clear --model gpt-4o`,
	}
	cmd.AddCommand(newLimitsSetCmd(), newLimitsClearCmd(), newLimitsShowCmd())
	return cmd
}

// limitsFlags are the flags every limits command takes.
type limitsFlags struct {
	cf              clusterFlags
	stateDir        string
	model, endpoint string
}

func (f *limitsFlags) register(cmd *cobra.Command, model bool) {
	runsFlags(cmd, &f.cf, &f.stateDir, false)
	if model {
		cmd.Flags().StringVar(&f.model, "model", "", "the model whose quota changes (required)")
		cmd.Flags().StringVar(&f.endpoint, "endpoint", "", "the --llm-config endpoint the model is served by (default: the default endpoint)")
	}
}

// limiter connects to the cluster's Redis.
func (f *limitsFlags) limiter() (*ratelimit.Limiter, func(), error) {
	rdb, closeRedis, err := runsRedis(&f.cf, f.stateDir)
	if err != nil {
		return nil, nil, err
	}
	l, err := ratelimit.New(ratelimit.Config{Client: rdb})
	if err != nil {
		closeRedis()
		return nil, nil, err
	}
	return l, closeRedis, nil
}

func (f *limitsFlags) group() (string, error) {
	if f.model == "" {
		return "", usage(errors.New("--model is required: the model whose quota changes"))
	}
	return ratelimit.LLMGroup(llmScope, f.endpoint, f.model), nil
}

func newLimitsSetCmd() *cobra.Command {
	var (
		f        limitsFlags
		rpm, tpm float64
	)
	cmd := &cobra.Command{
		Use:   "set",
		Short: "Set a model's requests or tokens per minute on the running cluster",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			group, err := f.group()
			if err != nil {
				return err
			}
			if rpm < 0 || tpm < 0 || rpm == 0 && tpm == 0 {
				return usage(fmt.Errorf("--llm-rpm %v, --llm-tpm %v: give one or both above 0 (quorum limits clear returns to the configured quota)", rpm, tpm))
			}
			l, done, err := f.limiter()
			if err != nil {
				return err
			}
			defer done()
			if err := l.SetLLMLimit(cmd.Context(), group, ratelimit.SetQuota{RequestsPerMinute: rpm, TokensPerMinute: tpm}); err != nil {
				return err
			}
			fmt.Fprintf(cmd.OutOrStdout(), "%s: %s; every worker applies it within %s\n", group, quotaText(ratelimit.SetQuota{RequestsPerMinute: rpm, TokensPerMinute: tpm}), ratelimit.LimitsRefresh)
			return nil
		},
	}
	f.register(cmd, true)
	cmd.Flags().Float64Var(&rpm, "llm-rpm", 0, "requests per minute (0: keep the configured)")
	cmd.Flags().Float64Var(&tpm, "llm-tpm", 0, "tokens per minute (0: keep the configured)")
	return cmd
}

func newLimitsClearCmd() *cobra.Command {
	var f limitsFlags
	cmd := &cobra.Command{
		Use:   "clear",
		Short: "Return a model to its configured quota",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			group, err := f.group()
			if err != nil {
				return err
			}
			l, done, err := f.limiter()
			if err != nil {
				return err
			}
			defer done()
			if err := l.ClearLLMLimit(cmd.Context(), group); err != nil {
				return err
			}
			fmt.Fprintf(cmd.OutOrStdout(), "%s: back to its configured quota within %s\n", group, ratelimit.LimitsRefresh)
			return nil
		},
	}
	f.register(cmd, true)
	return cmd
}

func newLimitsShowCmd() *cobra.Command {
	var f limitsFlags
	cmd := &cobra.Command{
		Use:   "show",
		Short: "List the limits set on the cluster and their changes",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			l, done, err := f.limiter()
			if err != nil {
				return err
			}
			defer done()
			set, err := l.LLMLimits(cmd.Context())
			if err != nil {
				return err
			}
			changes, err := l.LimitChanges(cmd.Context())
			if err != nil {
				return err
			}
			printLimits(cmd.OutOrStdout(), set, changes)
			return nil
		},
	}
	f.register(cmd, false)
	return cmd
}

func printLimits(w io.Writer, set map[string]ratelimit.SetQuota, changes []ratelimit.LimitChange) {
	if len(set) == 0 {
		fmt.Fprintln(w, "No limit set: every model has its configured quota.")
	}
	groups := make([]string, 0, len(set))
	for g := range set {
		groups = append(groups, g)
	}
	sort.Strings(groups)
	for _, g := range groups {
		fmt.Fprintf(w, "%s: %s\n", g, quotaText(set[g]))
	}
	if len(changes) > 0 {
		fmt.Fprintln(w, "Changes, newest first:")
	}
	for _, c := range changes {
		what := quotaText(c.Quota)
		if c.Cleared {
			what = "cleared (the configured quota)"
		}
		fmt.Fprintf(w, "  %s  %s: %s\n", c.At.UTC().Format(time.RFC3339), c.Group, what)
	}
}

func quotaText(q ratelimit.SetQuota) string {
	switch {
	case q.RequestsPerMinute > 0 && q.TokensPerMinute > 0:
		return fmt.Sprintf("%g requests/min, %g tokens/min", q.RequestsPerMinute, q.TokensPerMinute)
	case q.RequestsPerMinute > 0:
		return fmt.Sprintf("%g requests/min (tokens as configured)", q.RequestsPerMinute)
	}
	return fmt.Sprintf("%g tokens/min (requests as configured)", q.TokensPerMinute)
}
