package cli

import (
	"errors"

	"github.com/spf13/cobra"

	"github.com/quorumsql/quorum/internal/version"
)

// exitError carries a specific exit status (e.g. inspect --strict finding
// problems) without printing usage.
type exitError struct {
	code int
	msg  string
}

func (e *exitError) Error() string { return e.msg }

// Exit codes: 0 every example answered or had no answer, 1 some examples
// failed (run.json says why; the run can be resumed), 2 bad usage or input,
// 3 the run was interrupted or aborted (resumable).
const (
	exitFailedExamples = 1
	exitUsage          = 2
	exitAborted        = 3
)

// usage marks an error of the command line or its input (exit 2).
func usage(err error) error {
	if err == nil {
		return nil
	}
	return &exitError{code: exitUsage, msg: err.Error()}
}

func exitCode(err error) int {
	var ee *exitError
	if errors.As(err, &ee) {
		return ee.code
	}
	return 1
}

// NewRootCmd is the quorum command with every subcommand.
func NewRootCmd() *cobra.Command {
	root := &cobra.Command{
		Use:   "quorum",
		Short: "Distributed Text-to-SQL agent runner (ReFoRCE, PExA, RAISE) for Spider 2.0-style workloads",
		Long: `quorum runs Text-to-SQL agents over benchmark datasets and enterprise
workloads, within the LLM and warehouse quotas of a cluster.

Start with:
  quorum inspect examples/demo            what a dataset holds and what is wrong with it
  quorum run --dataset examples/demo      run an agent over it (quorum agents lists them)
  quorum eval --gold DIR --pred DIR       score predictions with Spider 2.0's rules`,
		SilenceUsage:  true,
		SilenceErrors: true,
	}
	root.SetFlagErrorFunc(func(_ *cobra.Command, err error) error { return usage(err) })
	root.AddCommand(newInspectCmd(), newEvalCmd(), newRunCmd(), newSolveCmd(), newServeCmd(), newAskCmd(), newBenchCmd(), newAgentsCmd(), newLLMSimCmd(),
		newCoordinatorCmd(), newGeneratorCmd(), newExplorerCmd(), newVoterCmd(), newCheckSQLCmd(), newTraceCmd(), newVersionCmd(), newAnalyzeCmd(), newCompareCmd())
	root.Version = version.String()
	root.SetVersionTemplate("quorum {{.Version}}\n")
	for _, c := range root.Commands() {
		c.Example = examples[c.Name()]
	}
	root.AddCommand(newRunsCmd(), newLimitsCmd()) // after the loop: their examples are their own (runs.go, limits.go)
	return root
}

// examples are shown by quorum CMD --help; every command has one (a test
// checks).
var examples = map[string]string{
	"analyze": `  quorum analyze sampling --run out/fixed    # a run of quorum run --dataset examples/demo --sim-difficulty default --out out/fixed
  quorum analyze sampling --run out/fixed --sampling-threshold 0.95 --json`,
	"serve": `  quorum serve --dataset examples/demo --no-auth
  quorum serve --dataset examples/demo --api-keys-file keys.txt --listen :8080 --tenant-rpm 30
  quorum serve --dataset DIR --nats-url nats://… --redis-url rediss://… --api-keys-file keys.txt   # join a cluster`,
	"ask": `  quorum ask --dataset examples/demo --db shop "How many customers does the shop have?"
  quorum ask --server http://quorum:8080 --api-key KEY --db shop "Which category sells most?"`,
	"inspect": `  quorum inspect examples/demo
  quorum inspect --strict ../spider2-lite
  quorum inspect --prompts --json examples/demo`,
	"eval": `  quorum eval --gold examples/demo/evaluation_suite/gold --pred out/demo
  quorum eval --gold GOLD --pred out/run --mode sql --json`,
	"run": `  quorum run --dataset examples/demo --out out/mine
  quorum run --dataset DIR --llm-base-url http://localhost:8000/v1 --model qwen2.5-coder --llm-rpm 600
  quorum run --dataset DIR --run-id RUN --out out/mine      # resume an interrupted run`,
	"solve": `  quorum solve --dataset examples/demo --examples 5
  quorum solve --dataset DIR --ids local001,local002 --llm-rpm 60 --out out/solve`,
	"bench": `  quorum bench --out out/bench
  quorum bench --examples 44 --votes 4 --llm-rpm 600 --no-scaling --out out/bench-small`,
	"agents": `  quorum agents
  quorum agents --json`,
	"llmsim":           `  quorum llmsim --dataset examples/demo --listen 127.0.0.1:8080 --llm-rpm 600`,
	"coordinator":      `  quorum coordinator --nats-url nats://nats:4222 --redis-url redis://redis:6379/0 --dataset /data/spider2-lite --out /out`,
	"generator-worker": `  quorum generator-worker --nats-url nats://nats:4222 --redis-url redis://redis:6379/0 --llm-base-url https://api.openai.com/v1 --llm-rpm 3000`,
	"explorer-worker":  `  quorum explorer-worker --nats-url nats://nats:4222 --redis-url redis://redis:6379/0 --warehouses sqlite --concurrency 16`,
	"voter":            `  quorum voter --nats-url nats://nats:4222 --redis-url redis://redis:6379/0`,
	"trace": `  quorum trace --out out/run-1 --example local002            # the tree, texts cut to a line
  quorum trace --out out/run-1 --example local002 --full     # prompts, replies and rows whole
  quorum trace --run run-1 --example local002 --json --redis-url rediss://…`,
	"check-sql": `  quorum check-sql --dialect sqlite examples/demo/evaluation_suite/gold/sql/local*.sql
  quorum check-sql --dialect bigquery query.sql      # exit 1 and the reason when refused`,
	"compare": `  quorum compare out/reforce out/pexa
  quorum compare out/fixed out/adaptive --fail-on-change     # exit 1 if any answer moved
  quorum compare out/seed1 out/seed2 out/seed3 --json`,
	"version": `  quorum version
  quorum --version`,
}

func newVersionCmd() *cobra.Command {
	return &cobra.Command{
		Use:   "version",
		Short: "Print quorum's version",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			cmd.Println("quorum", version.String())
			return nil
		},
	}
}
