package cli

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"testing"

	"github.com/quorumsql/quorum/internal/testutil/tier"
)

var (
	quorumBinOnce sync.Once
	quorumBin     string
	quorumBinErr  error
)

// quorumBinary builds cmd/quorum once per test process, for tests that
// must measure a real process (its peak memory, its exit code).
func quorumBinary(t *testing.T) string {
	t.Helper()
	tier.Servers(t, "a built quorum binary")
	quorumBinOnce.Do(func() {
		// make test builds it once for every package.
		if bin := os.Getenv("QUORUM_TEST_BIN"); bin != "" {
			quorumBin = bin
			return
		}
		dir, err := os.MkdirTemp("", "quorum-bin-")
		if err != nil {
			quorumBinErr = err
			return
		}
		quorumBin = filepath.Join(dir, "quorum")
		out, err := exec.Command("go", "build", "-o", quorumBin, "../../cmd/quorum").CombinedOutput()
		if err != nil {
			quorumBinErr = fmt.Errorf("go build: %v\n%s", err, out)
		}
	})
	if quorumBinErr != nil {
		t.Fatal(quorumBinErr)
	}
	return quorumBin
}
