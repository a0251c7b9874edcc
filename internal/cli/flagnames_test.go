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
	aliases, options := flagAliases(), optionFlags()
	var walk func(c *cobra.Command)
	seen := 0
	walk = func(c *cobra.Command) {
		c.Flags().VisitAll(func(f *pflag.Flag) {
			seen++
			if _, ok := options[f.Name]; ok {
				// An agent option's old flag: an alias of --agent-option.
				switch {
				case f.Deprecated == "" || !f.Hidden:
					t.Errorf("%s --%s: a second name for --agent-option %s=, not deprecated", c.CommandPath(), f.Name, f.Name)
				case !strings.Contains(f.Deprecated, "--agent-option "+f.Name+"="):
					t.Errorf("%s --%s: its deprecation %q does not name --agent-option %s=", c.CommandPath(), f.Name, f.Deprecated, f.Name)
				case c.Flags().Lookup("agent-option") == nil:
					t.Errorf("%s --%s: no --agent-option beside it", c.CommandPath(), f.Name)
				}
				return
			}
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

// TestOptionFlagsAreAgentOptions: an agent option's old flag adds
// NAME=VALUE to --agent-option, in command-line order with it, and says
// which option it sets.
func TestOptionFlagsAreAgentOptions(t *testing.T) {
	for _, tc := range []struct {
		cmd  string
		args []string
		want []string
	}{
		{"run", []string{"--no-exploration", "--agent-option", "link-budget=5", "--link-budget", "7"}, []string{"no-exploration=true", "link-budget=5", "link-budget=7"}},
		{"solve", []string{"--model-vote=false", "--compression", "structural"}, []string{"model-vote=false", "compression=structural"}},
		{"bench", []string{"--gold-schema", "--agent-option", "gold-schema=false"}, []string{"gold-schema=true", "gold-schema=false"}},
	} {
		c, _, err := NewRootCmd().Find([]string{tc.cmd})
		if err != nil {
			t.Fatal(err)
		}
		var stderr strings.Builder
		c.Flags().SetOutput(&stderr)
		if err := c.ParseFlags(tc.args); err != nil {
			t.Fatalf("%s %v: %v", tc.cmd, tc.args, err)
		}
		got, err := c.Flags().GetStringArray("agent-option")
		if err != nil || strings.Join(got, " ") != strings.Join(tc.want, " ") {
			t.Errorf("%s %v: --agent-option %q (%v), want %q", tc.cmd, tc.args, got, err, tc.want)
		}
		if name := strings.TrimPrefix(tc.args[0], "--"); !strings.Contains(stderr.String(), "use --agent-option "+strings.Split(name, "=")[0]+"=") {
			t.Errorf("%s %s: stderr %q does not name the option", tc.cmd, tc.args[0], stderr.String())
		}
	}
	c, _, _ := NewRootCmd().Find([]string{"run"})
	if err := c.ParseFlags([]string{"--no-vote=maybe"}); err == nil {
		t.Error("--no-vote=maybe was accepted")
	}
}
