// Package cli holds quorum's commands: cmd/quorum exposes them all, and each
// role binary (cmd/coordinator, cmd/generator-worker, cmd/explorer-worker,
// cmd/voter) exposes its own as its root command.
package cli

import (
	"context"
	"fmt"
	"os"
	"os/signal"
	"syscall"

	"github.com/spf13/cobra"
)

// Version is stamped at build time with -ldflags "-X github.com/quorumsql/quorum/internal/cli.Version=...".
var Version = "dev"

// Main runs cmd with SIGINT/SIGTERM cancelling its context, and exits with
// the command's status.
func Main(cmd *cobra.Command) {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := cmd.ExecuteContext(ctx); err != nil {
		fmt.Fprintln(os.Stderr, cmd.Name()+":", err)
		stop()
		os.Exit(exitCode(err))
	}
}
