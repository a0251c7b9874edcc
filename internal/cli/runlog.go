package cli

import (
	"fmt"
	"os"
	"path/filepath"

	"github.com/spf13/cobra"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"

	"github.com/quorumsql/quorum/internal/runtime/coordinator"
	"github.com/quorumsql/quorum/pkg/outputs"
)

// RunLog is the file in a run's output folder that takes its roles' logs
// when the run is watched on a terminal.
const RunLog = "quorum.log"

// logsAside says whether quorum run sends its roles' JSON logs to RunLog:
// when its progress line is drawn on a terminal that stderr shares, where
// they would break into that line, unless --log-level asked for them.
func logsAside(cmd *cobra.Command) bool {
	return !cmd.Flags().Changed("log-level") && cmd.ErrOrStderr() == os.Stderr &&
		coordinator.IsTerminal(os.Stdout) && coordinator.IsTerminal(os.Stderr)
}

// logToFile returns log writing, at its levels, to the file at path
// instead (appended: a resumed run keeps its earlier sessions' lines;
// 0600: the lines name examples and errors).
func logToFile(log *zap.Logger, path string) (*zap.Logger, func() error, error) {
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_APPEND|os.O_CREATE, outputs.FileMode)
	if err != nil {
		return nil, nil, fmt.Errorf("the run's log %s: %w", path, err)
	}
	enc := zapcore.NewJSONEncoder(zap.NewProductionEncoderConfig())
	return log.WithOptions(zap.WrapCore(func(c zapcore.Core) zapcore.Core {
		return zapcore.NewCore(enc, zapcore.Lock(f), c)
	})), f.Close, nil
}

// runLogPath is RunLog in the output folder out.
func runLogPath(out string) string { return filepath.Join(out, RunLog) }
