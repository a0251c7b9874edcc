package cli

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"go.uber.org/zap/zaptest/observer"
)

// TestLogToFile: a watched run's role logs go to quorum.log in its output
// folder (private, appended across sessions), at the logger's own level,
// and nothing of them to the logger's first destination.
func TestLogToFile(t *testing.T) {
	t.Parallel()
	out := t.TempDir()
	for session, tc := range []struct{ msg, below string }{
		{"the run's budget admits no new example", "an info line"},
		{"example failed", "another info line"},
	} {
		core, first := observer.New(zapcore.WarnLevel)
		log, closeLog, err := logToFile(zap.New(core), runLogPath(out))
		if err != nil {
			t.Fatal(err)
		}
		log.With(zap.String("run", "r1")).Warn(tc.msg)
		log.Info(tc.below)
		if err := closeLog(); err != nil {
			t.Fatal(err)
		}
		if first.Len() != 0 {
			t.Errorf("session %d: %d lines reached the terminal's logger", session, first.Len())
		}
		b, err := os.ReadFile(filepath.Join(out, RunLog))
		if err != nil {
			t.Fatal(err)
		}
		lines := strings.Split(strings.TrimSpace(string(b)), "\n")
		if len(lines) != session+1 || !strings.Contains(lines[session], `"msg":"`+tc.msg+`"`) || !strings.Contains(lines[session], `"run":"r1"`) {
			t.Errorf("session %d: quorum.log holds %q, want %d lines, the last the warning %q with its run", session, b, session+1, tc.msg)
		}
		if strings.Contains(string(b), tc.below) {
			t.Errorf("session %d: quorum.log holds %q, below the logger's level", session, tc.below)
		}
	}
	st, err := os.Stat(runLogPath(out))
	if err != nil {
		t.Fatal(err)
	}
	if st.Mode().Perm() != 0o600 {
		t.Errorf("quorum.log has mode %v, want 0600", st.Mode().Perm())
	}
}
