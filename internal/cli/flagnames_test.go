package cli

import (
	"strings"
	"testing"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
)

// TestOneNamePerConcept walks every command's flags: a concept has one
// name everywhere; an old spelling is only a hidden, deprecated alias that
// names the new one and sets the same value.
func TestOneNamePerConcept(t *testing.T) {
	aliases := flagAliases()
	var walk func(c *cobra.Command)
	seen := 0
	walk = func(c *cobra.Command) {
		c.Flags().VisitAll(func(f *pflag.Flag) {
			seen++
			name, old := aliases[f.Name]
			if !old {
				return
			}
			switch {
			case f.Deprecated == "" || !f.Hidden:
				t.Errorf("%s --%s: a second name for --%s, not deprecated", c.CommandPath(), f.Name, name)
			case !strings.Contains(f.Deprecated, "--"+name):
				t.Errorf("%s --%s: its deprecation %q does not name --%s", c.CommandPath(), f.Name, f.Deprecated, name)
			case c.Flags().Lookup(name) == nil || c.Flags().Lookup(name).Value != f.Value:
				t.Errorf("%s --%s: --%s does not exist beside it or holds another value", c.CommandPath(), f.Name, name)
			}
		})
		for _, sub := range c.Commands() {
			walk(sub)
		}
	}
	walk(NewRootCmd())
	if seen < 100 {
		t.Fatalf("walked %d flags; the command tree was not built", seen)
	}
}

// TestDeprecatedSpellingStillWorks: --limit sets --examples and says so.
func TestDeprecatedSpellingStillWorks(t *testing.T) {
	for _, tc := range []struct{ cmd, old, name, value string }{
		{"run", "limit", "examples", "3"},
		{"solve", "limit", "examples", "3"},
		{"llmsim", "addr", "listen", "127.0.0.1:1"},
		{"llmsim", "rpm", "llm-rpm", "60"},
		{"bench", "tpm", "llm-tpm", "1000"},
		{"serve", "api-keys", "api-keys-file", "k.txt"},
	} {
		root := NewRootCmd()
		c, _, err := root.Find([]string{tc.cmd})
		if err != nil {
			t.Fatal(err)
		}
		var stderr strings.Builder
		c.Flags().SetOutput(&stderr)
		if err := c.ParseFlags([]string{"--" + tc.old, tc.value}); err != nil {
			t.Fatalf("%s --%s: %v", tc.cmd, tc.old, err)
		}
		if got := c.Flags().Lookup(tc.name).Value.String(); got != tc.value || !flagChanged(c, tc.name) {
			t.Errorf("%s --%s %s: --%s = %q (changed %v); want %q", tc.cmd, tc.old, tc.value, tc.name, got, flagChanged(c, tc.name), tc.value)
		}
		if !strings.Contains(stderr.String(), "use --"+tc.name) {
			t.Errorf("%s --%s: stderr %q does not name --%s", tc.cmd, tc.old, stderr.String(), tc.name)
		}
	}
}
