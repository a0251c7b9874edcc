package cli

import (
	"fmt"
	"strconv"

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

// optionFlags are the flags that once set an agent option of the same
// name (ReFoRCE's, from before every agent took --agent-option), true for
// a switch. Each is now a hidden, deprecated alias of --agent-option
// NAME=VALUE that says so when used.
func optionFlags() map[string]bool {
	return map[string]bool{
		"no-exploration": true, "format-restriction": true, "self-consistency": true, "cte-refine": true,
		"model-vote": true, "pool-rounds": true, "link-budget": false,
		// The ablations of ReFoRCE's paper (v2 Tables 3 and 4) and its
		// compression mode.
		"explore-all": true, "no-vote": true, "no-random-selection": true, "no-compression": true,
		"gold-tables": true, "gold-schema": true, "compression": false,
	}
}

// The option flags each command had, as the aliases it keeps.
var (
	ablationOptionFlags = []string{"explore-all", "no-vote", "no-random-selection", "no-compression", "gold-tables", "gold-schema", "compression"}
	runOptionFlags      = append([]string{"no-exploration", "format-restriction", "self-consistency", "cte-refine", "link-budget"}, ablationOptionFlags...)
	solveOptionFlags    = append([]string{"model-vote", "pool-rounds"}, runOptionFlags...)
)

// optionAliases registers the named option flags on fs as deprecated
// aliases of its --agent-option: each adds NAME=VALUE to that list, in
// command-line order, so the later of two spellings wins as between two
// --agent-option.
func optionAliases(fs *pflag.FlagSet, names ...string) {
	if fs.Lookup("agent-option") == nil {
		panic("optionAliases: no --agent-option") // a programming error, caught by the flag test
	}
	all := optionFlags()
	for _, name := range names {
		isSwitch, ok := all[name]
		if !ok {
			panic("optionAliases: --" + name + " is not an option flag")
		}
		v := &optionFlag{name: name, fs: fs, isSwitch: isSwitch}
		f := &pflag.Flag{Name: name, Value: v, Usage: "the old spelling of --agent-option " + name + "=…"}
		use := "use --agent-option " + name + "=VALUE"
		if isSwitch {
			f.NoOptDefVal, f.DefValue = "true", "false"
			use = "use --agent-option " + name + "=true"
		}
		fs.AddFlag(f)
		_ = fs.MarkDeprecated(name, use)
	}
}

// optionFlag is an option flag's value: setting it adds NAME=VALUE to the
// --agent-option list.
type optionFlag struct {
	name     string
	fs       *pflag.FlagSet
	isSwitch bool
	last     string
}

func (o *optionFlag) String() string { return o.last }

func (o *optionFlag) Set(v string) error {
	if o.isSwitch {
		b, err := strconv.ParseBool(v)
		if err != nil {
			return fmt.Errorf("want true or false")
		}
		v = strconv.FormatBool(b)
	}
	o.last = v
	return o.fs.Set("agent-option", o.name+"="+v)
}

func (o *optionFlag) Type() string {
	if o.isSwitch {
		return "bool"
	}
	return "string"
}
