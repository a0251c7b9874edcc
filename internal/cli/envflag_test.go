package cli

import (
	"strings"
	"testing"
	"time"

	"github.com/spf13/cobra"
)

// TestEnvDuration: QUORUM_REDIS_FAILOVER_TIME (the deploy files set it) is
// --redis-failover-time's default; a value that is no duration is an error
// naming the variable, not a silent 0.
func TestEnvDuration(t *testing.T) {
	for _, tc := range []struct {
		value string
		want  time.Duration
		err   string
	}{
		{"", 0, ""},
		{"10s", 10 * time.Second, ""},
		{" 1m30s ", 90 * time.Second, ""},
		{"10", 0, "QUORUM_REDIS_FAILOVER_TIME"},
		{"-5s", 0, "want a duration"},
	} {
		t.Setenv("QUORUM_REDIS_FAILOVER_TIME", tc.value)
		got, err := envDuration("QUORUM_REDIS_FAILOVER_TIME")
		switch {
		case tc.err == "" && (err != nil || got != tc.want):
			t.Errorf("%q: %v, %v; want %v", tc.value, got, err, tc.want)
		case tc.err != "" && (err == nil || !strings.Contains(err.Error(), tc.err)):
			t.Errorf("%q: error %v, want one naming %q", tc.value, err, tc.err)
		}
	}
	t.Setenv("QUORUM_REDIS_FAILOVER_TIME", "ten seconds")
	var f clusterFlags
	f.register(&cobra.Command{Use: "x"}, true)
	if _, err := f.process("generator"); err == nil || !strings.Contains(err.Error(), "QUORUM_REDIS_FAILOVER_TIME") {
		t.Errorf("a role with QUORUM_REDIS_FAILOVER_TIME=ten seconds started: %v", err)
	}
}
