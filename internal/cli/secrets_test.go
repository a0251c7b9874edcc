package cli

import (
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/quorumsql/quorum/pkg/dataset"
	"github.com/quorumsql/quorum/pkg/llmsim"
)

// TestSecretsNeverWritten: a run configured with a password in the LLM base
// URL and an API key writes neither into its output, its log, run.json,
// report.html, nor the state it keeps (NATS store, Redis AOF).
func TestSecretsNeverWritten(t *testing.T) {
	t.Parallel()
	ds, err := dataset.Load(demo, dataset.Options{})
	if err != nil {
		t.Fatal(err)
	}
	sim, err := llmsim.New(llmsim.Config{Dataset: ds})
	if err != nil {
		t.Fatal(err)
	}
	ts := httptest.NewServer(sim)
	t.Cleanup(ts.Close)
	const password, key = "pw-Zq81xVv", "sk-KEY-77QQxx"
	base := strings.Replace(ts.URL, "http://", "http://alice:"+password+"@", 1) + "/v1"
	out := filepath.Join(t.TempDir(), "out")
	log, err := run(t, "run", "--dataset", demo, "--limit", "2", "--llm-base-url", base, "--llm-api-key", key,
		"--out", out, "--run-id", "secrets", "--log-level", "debug")
	if err != nil {
		t.Fatalf("run: %v\n%s", err, log)
	}
	for _, s := range []string{password, key} {
		if strings.Contains(log, s) {
			t.Errorf("the run's output shows %q", s)
		}
	}
	filepath.Walk(out, func(p string, info os.FileInfo, err error) error {
		if err != nil || info.IsDir() {
			return nil
		}
		b, _ := os.ReadFile(p)
		for _, s := range []string{password, key} {
			if strings.Contains(string(b), s) {
				t.Errorf("%s holds %q", p, s)
			}
		}
		return nil
	})
}
