package cli

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"testing"
	"time"
)

// readmeCommand is one command of the shell blocks of the README or a
// docs page, with its continuation lines joined, the file and line it is
// on, and why it is not run here ("" = it runs).
type readmeCommand struct {
	file string
	line int
	text string
	skip string
}

// where names the command's file and line, as "docs/usage.md:42".
func (c readmeCommand) where() string { return fmt.Sprintf("%s:%d", c.file, c.line) }

// readmePages are the pages whose commands a reader types, relative to the
// repository: README.md, then every docs/*.md page in name order (the
// usage, operations, failures and performance pages the README links to
// hold what it once held itself).
func readmePages(t *testing.T) []string {
	t.Helper()
	docs, err := filepath.Glob("../../docs/*.md")
	if err != nil {
		t.Fatal(err)
	}
	sort.Strings(docs)
	pages := []string{"README.md"}
	for _, d := range docs {
		pages = append(pages, "docs/"+filepath.Base(d))
	}
	if len(pages) < 2 {
		t.Fatal("no docs/*.md page found")
	}
	return pages
}

// readmeCommands reads the commands of a page's ```sh blocks in order.
func readmeCommands(readme string) []readmeCommand {
	var cmds []readmeCommand
	inSh := false
	var cur *readmeCommand
	for i, line := range strings.Split(readme, "\n") {
		trimmed := strings.TrimSpace(line)
		if strings.HasPrefix(trimmed, "```") {
			inSh = !inSh && (trimmed == "```sh" || trimmed == "```bash" || trimmed == "```shell")
			cur = nil
			continue
		}
		if !inSh {
			continue
		}
		if cur != nil {
			cur.text += " " + strings.TrimSuffix(trimmed, "\\")
			if !strings.HasSuffix(trimmed, "\\") {
				cur = nil
			}
			continue
		}
		if trimmed == "" || strings.HasPrefix(trimmed, "#") {
			continue
		}
		cmds = append(cmds, readmeCommand{line: i + 1, text: strings.TrimSuffix(trimmed, "\\")})
		if strings.HasSuffix(trimmed, "\\") {
			cur = &cmds[len(cmds)-1]
		}
	}
	for i := range cmds {
		cmds[i].skip = readmeSkip(cmds[i].text)
	}
	return cmds
}

// readmeSkip says why a README command cannot run on a fresh clone in a
// test: it needs credentials or servers the reader has, names a
// placeholder, or runs for many minutes (make bench's own scenario).
func readmeSkip(c string) string {
	cmd := stripComment(c)
	words := strings.Fields(cmd)
	switch {
	case len(words) == 0:
		return "no command"
	case strings.Contains(cmd, "…") || strings.Contains(cmd, "path/to/") || strings.Contains(cmd, " /data/") || strings.Contains(cmd, " /out/"):
		return "a placeholder for the reader's own data or servers"
	case strings.HasSuffix(cmd, "&"):
		return "one process of a cluster the reader runs"
	case words[0] == "make":
		return "a make target (make test runs this test; make demo is quorum run and eval, run here)"
	case words[0] == "quorum":
		return "quorum on the reader's PATH, over the reader's files"
	case words[0] != "bin/quorum":
		return "not quorum's binary, or a request to a running server"
	case len(words) > 1 && (words[1] == "serve" || words[1] == "llmsim"):
		return "a server that runs until stopped (its own tests start it)"
	case len(words) > 1 && words[1] == "bench":
		return "a benchmark paced by its quota: minutes of wall time by design (make bench)"
	case regexp.MustCompile(`--(server|redis-url|nats-url|llm-base-url)\b`).MatchString(cmd):
		return "needs a server the reader runs"
	}
	return ""
}

func stripComment(c string) string {
	if i := strings.Index(c, "  #"); i >= 0 {
		c = c[:i]
	}
	return strings.TrimSpace(c)
}

// readmeMinRan is how many commands of the README and the docs pages
// must run (with ../shared beside the repository): the README's own
// (run, eval, trace, ask) and docs/usage.md's (run, agents, solve, eval,
// inspect, ask), which the README held before they moved. Fewer means
// the skip rules leave out what a reader would type.
const (
	readmeMinRan       = 13
	readmeMinRanREADME = 4
)

// TestREADMECommandsRun runs the commands of the README and then of each
// docs page as written, in order, from a folder laid out like a fresh
// clone (examples/, bin/quorum, and ../shared when it is there), with a
// home of their own and no LLM credentials: every one that needs no
// credentials, servers or placeholders must exit 0.
func TestREADMECommandsRun(t *testing.T) {
	if testing.Short() {
		t.Skip("runs the README's commands")
	}
	t.Parallel()
	var cmds []readmeCommand
	for _, page := range readmePages(t) {
		b, err := os.ReadFile(filepath.Join("../..", page))
		if err != nil {
			t.Fatal(err)
		}
		for _, c := range readmeCommands(string(b)) {
			c.file = page
			cmds = append(cmds, c)
		}
	}
	root := t.TempDir()
	work := filepath.Join(root, "quorum")
	if err := os.MkdirAll(filepath.Join(work, "bin"), 0o755); err != nil {
		t.Fatal(err)
	}
	examples, _ := filepath.Abs("../../examples")
	if err := os.Symlink(examples, filepath.Join(work, "examples")); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(quorumBinary(t), filepath.Join(work, "bin", "quorum")); err != nil {
		t.Fatal(err)
	}
	shared, _ := filepath.Abs("../../../shared")
	hasShared := false
	if _, err := os.Stat(shared); err == nil {
		hasShared = os.Symlink(shared, filepath.Join(root, "shared")) == nil
	}
	env := []string{"HOME=" + filepath.Join(root, "home"), "PATH=" + os.Getenv("PATH"), "TMPDIR=" + os.TempDir()}
	ran, ranREADME, needShared := 0, 0, 0
	for _, c := range cmds {
		if c.skip == "" && strings.Contains(c.text, "../shared") && !hasShared {
			c.skip = "../shared is not beside the repository"
			needShared++
		}
		if c.skip != "" {
			t.Logf("%s not run (%s): %s", c.where(), c.skip, c.text)
			continue
		}
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
		cmd := exec.CommandContext(ctx, "sh", "-c", c.text)
		cmd.Dir, cmd.Env = work, env
		began := time.Now()
		out, err := cmd.CombinedOutput()
		cancel()
		if errors.Is(ctx.Err(), context.DeadlineExceeded) {
			t.Errorf("%s did not finish within 5 minutes: %s\n%s", c.where(), c.text, tail(string(out), 2000))
			continue
		}
		if err != nil {
			t.Errorf("%s exits with %v on a fresh clone: %s\n%s", c.where(), err, c.text, tail(string(out), 2000))
			continue
		}
		// A summary says what happened: no exploration when it is off.
		if strings.Contains(c.text, "no-exploration=true") && !strings.Contains(string(out), "low (decided from the first round)") {
			t.Errorf("%s: with exploration off the summary does not say the low-confidence examples were decided from the first round:\n%s", c.where(), tail(string(out), 1500))
		}
		ran++
		if c.file == "README.md" {
			ranREADME++
		}
		t.Logf("%s ran in %.1fs: %s", c.where(), time.Since(began).Seconds(), c.text) //clock:ok logged, not asserted
	}
	// The README's examples and docs/usage.md's commands (run, solve,
	// eval, inspect, ask, agents) must be among them, or the rules above
	// skip too much; a command left out only for want of ../shared counts.
	if ran+needShared < readmeMinRan {
		t.Errorf("only %d commands of the README and docs pages ran (want %d): the skip rules leave out what a reader would type", ran, readmeMinRan-needShared)
	}
	if ranREADME < readmeMinRanREADME {
		t.Errorf("only %d of the README's own commands ran (want %d): its examples must run as written", ranREADME, readmeMinRanREADME)
	}
}

func tail(s string, n int) string {
	if len(s) > n {
		return "…" + s[len(s)-n:]
	}
	return s
}
