package cli

import (
	"context"
	"strings"
	"testing"

	"github.com/quorumsql/quorum/internal/ratelimit"
	"github.com/quorumsql/quorum/internal/testutil/redistest"
)

// TestLimitsCommands: quorum limits set writes a model's quota where every
// role's LLM budget reads it (the cluster's Redis, the roles' scope), show
// lists it and its change, clear removes it; bad input is a usage error
// naming the flag.
func TestLimitsCommands(t *testing.T) {
	t.Parallel()
	srv := redistest.Start(t)
	url := srv.URL()
	for _, tc := range []struct {
		args []string
		want string // in the output, or the error
		fail bool
	}{
		{[]string{"limits", "show", "--redis-url", url}, "No limit set", false},
		{[]string{"limits", "set", "--redis-url", url, "--llm-rpm", "1500"}, "--model is required", true},
		{[]string{"limits", "set", "--redis-url", url, "--model", "gpt-4o"}, "give one or both above 0", true},
		{[]string{"limits", "set", "--redis-url", url, "--model", "gpt-4o", "--llm-rpm", "1500"}, "llm:gpt-4o: 1500 requests/min", false},
		{[]string{"limits", "set", "--redis-url", url, "--model", "o3", "--endpoint", "azure", "--llm-tpm", "400000"}, "llm@azure:o3: 400000 tokens/min", false},
		{[]string{"limits", "show", "--redis-url", url}, "llm:gpt-4o: 1500 requests/min (tokens as configured)", false},
		{[]string{"limits", "clear", "--redis-url", url, "--model", "gpt-4o"}, "back to its configured quota", false},
		{[]string{"limits", "show", "--redis-url", url}, "llm:gpt-4o: cleared", false},
	} {
		out, err := run(t, tc.args...)
		got := out
		if err != nil {
			got += err.Error()
		}
		if (err != nil) != tc.fail || !strings.Contains(got, tc.want) {
			t.Errorf("quorum %s: %q (error %v); want %q, failing %v", strings.Join(tc.args, " "), out, err, tc.want, tc.fail)
		}
	}
	// What the roles read: their budget's group for the model.
	l, err := ratelimit.New(ratelimit.Config{Client: srv.Client(t)})
	if err != nil {
		t.Fatal(err)
	}
	set, err := l.LLMLimits(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if len(set) != 1 || set[ratelimit.LLMGroup("llm", "azure", "o3")].TokensPerMinute != 400000 {
		t.Errorf("the limits the roles read: %+v, want o3 at azure alone, 400000 tokens/min", set)
	}
}
