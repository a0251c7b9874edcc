package cli

import (
	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
)

// flagAliases maps each deprecated flag spelling to the one name its
// concept has across every command (issue 28: the listen address was
// --listen / --addr, quotas --rpm / --llm-rpm, the example count --limit /
// --examples, the serve keys file --api-keys beside ask's --api-key). An
// old spelling still works, hidden, and says the new one when used.
func flagAliases() map[string]string {
	return map[string]string{
		"limit":    "examples",
		"addr":     "listen",
		"rpm":      "llm-rpm",
		"tpm":      "llm-tpm",
		"api-keys": "api-keys-file",
	}
}

// deprecate registers old as a deprecated spelling of the flag name,
// bound to the same value.
func deprecate(fs *pflag.FlagSet, name, old string) {
	f := fs.Lookup(name)
	if f == nil {
		panic("deprecate: no flag --" + name) // a programming error, caught by the flag test
	}
	fs.AddFlag(&pflag.Flag{Name: old, Usage: f.Usage, Value: f.Value, DefValue: f.DefValue, NoOptDefVal: f.NoOptDefVal})
	_ = fs.MarkDeprecated(old, "use --"+name)
}

// flagChanged reports whether the flag name, or a deprecated spelling of
// it, was given.
func flagChanged(cmd *cobra.Command, name string) bool {
	if cmd.Flags().Changed(name) {
		return true
	}
	for old, n := range flagAliases() {
		if n == name && cmd.Flags().Changed(old) {
			return true
		}
	}
	return false
}
