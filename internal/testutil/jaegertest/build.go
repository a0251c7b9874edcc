package jaegertest

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
)

// toolDir is the tool module, relative to the repository root, whose
// go.mod pins Jaeger; its dependencies stay out of quorum's go.mod.
const toolDir = "tools/jaeger"

// binary returns the Jaeger binary: $QUORUM_JAEGER_BIN, or bin/jaeger at
// the repository root, built first when missing or older than the tool
// module's go.mod or go.sum. It skips the test when the build fails (no
// module proxy, say), saying so; it fails it when the repository cannot be
// found.
func binary(t testing.TB) string {
	t.Helper()
	if p := os.Getenv(BinEnv); p != "" {
		return p
	}
	root, err := repoRoot()
	if err != nil {
		t.Fatal(err)
	}
	bin := filepath.Join(root, "bin", "jaeger")
	if fresh(bin, filepath.Join(root, toolDir, "go.mod"), filepath.Join(root, toolDir, "go.sum")) {
		return bin
	}
	// Built beside and renamed into place: test packages running at once
	// may both build, and neither starts a half-written binary.
	if err := os.MkdirAll(filepath.Dir(bin), 0o755); err != nil {
		t.Fatalf("jaeger: %v", err)
	}
	tmp, err := os.CreateTemp(filepath.Dir(bin), ".jaeger-*")
	if err != nil {
		t.Fatalf("jaeger: %v", err)
	}
	tmp.Close()
	defer os.Remove(tmp.Name())
	t.Logf("building Jaeger into %s (make jaeger; the first build takes minutes)", bin)
	cmd := exec.Command("go", "build", "-o", tmp.Name(), "github.com/jaegertracing/jaeger/cmd/jaeger")
	cmd.Dir = filepath.Join(root, toolDir)
	// The tool module is its own module, whatever the test's GOFLAGS say.
	cmd.Env = append(os.Environ(), "GOFLAGS=", "GOWORK=off")
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Skipf("Jaeger could not be built (cd %s && go build github.com/jaegertracing/jaeger/cmd/jaeger: %v), so the test against it is skipped:\n%s", toolDir, err, tail(string(out), 4<<10))
	}
	if err := os.Rename(tmp.Name(), bin); err != nil {
		t.Fatalf("jaeger: %v", err)
	}
	return bin
}

// fresh: bin exists and is newer than each of deps.
func fresh(bin string, deps ...string) bool {
	b, err := os.Stat(bin)
	if err != nil {
		return false
	}
	for _, d := range deps {
		if s, err := os.Stat(d); err == nil && s.ModTime().After(b.ModTime()) {
			return false
		}
	}
	return true
}

// repoRoot walks up from the working directory (a test's is its package's
// directory) to the directory that holds the tool module.
func repoRoot() (string, error) {
	dir, err := os.Getwd()
	if err != nil {
		return "", fmt.Errorf("jaeger: %w", err)
	}
	for d := dir; ; d = filepath.Dir(d) {
		if _, err := os.Stat(filepath.Join(d, toolDir, "go.mod")); err == nil {
			return d, nil
		}
		if filepath.Dir(d) == d {
			return "", fmt.Errorf("jaeger: no %s/go.mod above %s", toolDir, dir)
		}
	}
}
