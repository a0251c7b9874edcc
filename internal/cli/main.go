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

	"github.com/redis/go-redis/v9"
	"github.com/spf13/cobra"
)

type quietRedis struct{}

func (quietRedis) Printf(context.Context, string, ...any) {}

// Main runs cmd with SIGINT/SIGTERM cancelling its context, and exits with
// the command's status.
func Main(cmd *cobra.Command) {
	// go-redis prints every failed dial of an outage on its own; the roles
	// report an outage themselves (held tasks, /readyz).
	redis.SetLogger(quietRedis{})
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := cmd.ExecuteContext(ctx); err != nil {
		fmt.Fprintln(os.Stderr, cmd.Name()+":", err)
		stop()
		os.Exit(exitCode(err))
	}
}
