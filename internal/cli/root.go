package cli

import (
	"errors"

	"github.com/spf13/cobra"
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
	root.AddCommand(newInspectCmd(), newEvalCmd(), newRunCmd(), newSolveCmd(), newBenchCmd(), newAgentsCmd(), newLLMSimCmd(),
		newCoordinatorCmd(), newGeneratorCmd(), newExplorerCmd(), newVoterCmd(), newVersionCmd())
	return root
}

func newVersionCmd() *cobra.Command {
	return &cobra.Command{
		Use:   "version",
		Short: "Print quorum's version",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			cmd.Println("quorum", Version)
			return nil
		},
	}
}
