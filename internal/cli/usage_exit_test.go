package cli

import (
	"bytes"
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/quorumsql/quorum/internal/app/serve"
)

// TestEvalAndAskUsageErrorsExit2, through the binary: every error of
// eval's and ask's command line or input exits 2, as docs/usage.md promises,
// with a message naming what was wrong.
func TestEvalAndAskUsageErrorsExit2(t *testing.T) {
	t.Parallel()
	bin := quorumBinary(t)
	gold := filepath.Join(demo, "evaluation_suite", "gold")
	empty := t.TempDir()
	for _, tc := range []struct {
		name string
		args []string
		want string
	}{
		{"eval: an argument", []string{"eval", "extra"}, `"extra"`},
		{"eval: no folders", []string{"eval"}, "--gold and --pred are required"},
		{"eval: missing gold folder", []string{"eval", "--gold", filepath.Join(empty, "nope"), "--pred", empty}, "nope"},
		{"eval: unknown mode", []string{"eval", "--mode", "bogus", "--gold", gold, "--pred", empty}, "--mode"},
		{"eval: unknown metric", []string{"eval", "--metric", "bogus"}, "--metric"},
		{"eval: sql mode without a dataset", []string{"eval", "--mode", "sql", "--gold", gold, "--pred", empty}, "--dataset"},
		{"eval: bird without predictions", []string{"eval", "--metric", "bird"}, "--pred is required"},
		{"eval: bird without gold", []string{"eval", "--metric", "bird", "--pred", empty}, "--gold"},
		{"eval: sql mode, missing dataset", []string{"eval", "--mode", "sql", "--gold", gold, "--pred", empty, "--dataset", filepath.Join(empty, "nods")}, "nods"},
		{"inspect: no dataset", []string{"inspect"}, "accepts 1 arg"},
		{"inspect: two datasets", []string{"inspect", demo, demo}, "accepts 1 arg"},
		{"inspect: missing dataset", []string{"inspect", filepath.Join(empty, "nods")}, "nods"},
		{"ask: no question", []string{"ask", "--db", "shop"}, "accepts 1 arg"},
		{"ask: two questions", []string{"ask", "--db", "shop", "a", "b"}, "accepts 1 arg"},
		{"ask: no database", []string{"ask", "How many?"}, "--db is required"},
		{"ask: missing knowledge file", []string{"ask", "--db", "shop", "--knowledge-file", filepath.Join(empty, "k.md"), "q"}, "--knowledge-file"},
		{"ask: missing dataset", []string{"ask", "--dataset", filepath.Join(empty, "nods"), "--db", "shop", "q"}, "nods"},
		{"ask: nothing at --server", []string{"ask", "--server", "http://127.0.0.1:1", "--db", "shop", "q"}, "127.0.0.1:1"},
		{"ask: unknown database", []string{"ask", "--dataset", demo, "--state-dir", filepath.Join(empty, "state"), "--db", "nosuch", "q"}, `"nosuch"`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			defer cancel()
			cmd := exec.CommandContext(ctx, bin, tc.args...)
			cmd.Env = append(os.Environ(), "OPENAI_API_KEY=", "OPENAI_BASE_URL=", "QUORUM_API_KEY=")
			var stderr bytes.Buffer
			cmd.Stderr = &stderr
			_ = cmd.Run()
			if code := cmd.ProcessState.ExitCode(); code != exitUsage || !strings.Contains(stderr.String(), tc.want) {
				t.Errorf("quorum %s: exit %d, want %d with a message naming %q\n%s", strings.Join(tc.args, " "), code, exitUsage, tc.want, stderr.String())
			}
		})
	}
}

// TestAskPrintsNoTerminalEscapes: SQL, cells, column names and errors
// from the model or the database reach the terminal with their control
// characters shown as escapes, never as escape sequences; SQL keeps its
// lines.
func TestAskPrintsNoTerminalEscapes(t *testing.T) {
	t.Parallel()
	const esc = "\x1b]0;owned\x07\x1b[2J"
	answered := &serve.Question{Status: serve.Answered, SQL: "SELECT name\r\nFROM t -- " + esc + "\n\tWHERE 1",
		Columns: []string{"name" + esc}, Rows: [][]string{{"bob\x1b[31m\nred\u202eevil\u009b\x9b"}}, RowCount: 1,
		Confidence: "high", Method: "majority"}
	for _, tc := range []struct {
		name       string
		q          *serve.Question
		want, not  []string
		lineBreaks int
	}{
		{"answered", answered,
			[]string{`\x1b]0;owned\x07\x1b[2J`, "SELECT name\nFROM t", "\n\tWHERE 1", `bob\x1b[31m red\u202eevil\u009b�`, `name\x1b]0;owned`},
			[]string{"\x1b", "\x07", "\r", "\u202e", "\u009b", "\x9b"}, -1},
		{"failed", &serve.Question{Status: serve.Failed, Error: "near \"\x1b[8m\": syntax error"},
			[]string{`near "\x1b[8m": syntax error`}, []string{"\x1b"}, 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var b bytes.Buffer
			printAnswer(&b, tc.q)
			got := b.String()
			for _, s := range tc.want {
				if !strings.Contains(got, s) {
					t.Errorf("output lacks %q:\n%s", s, got)
				}
			}
			for _, s := range tc.not {
				if strings.Contains(got, s) {
					t.Errorf("output holds the raw %q:\n%q", s, got)
				}
			}
			if tc.lineBreaks >= 0 && strings.Count(got, "\n") != tc.lineBreaks {
				t.Errorf("%d lines, want %d:\n%q", strings.Count(got, "\n"), tc.lineBreaks, got)
			}
		})
	}
}
