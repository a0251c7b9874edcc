package cli

import (
	"encoding/json"
	"fmt"
	"text/tabwriter"

	"github.com/spf13/cobra"

	"github.com/quorumsql/quorum/pkg/agents"
)

func newAgentsCmd() *cobra.Command {
	var asJSON bool
	cmd := &cobra.Command{
		Use:   "agents",
		Short: "List the agents, their task kinds with the worker pool each runs on, and their options",
		Long: `Every agent runs on the same runtime. Its task kinds run on the generate
pool (LLM-bound, generator workers) or the explore pool (warehouse-heavy,
explorer workers). Choose an agent with --agent NAME on quorum run, solve,
coordinator and bench, and set its options with --agent-option NAME=VALUE.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			reg := agents.Builtin()
			w := cmd.OutOrStdout()
			if asJSON {
				type kind struct{ Name, Pool, Doc string }
				// Question says whether a question to quorum serve may
				// set the option (agent.Option.Asker).
				type option struct {
					Name, Default, Usage string
					Question             bool
				}
				type entry struct {
					Name    string   `json:"name"`
					Doc     string   `json:"doc"`
					Kinds   []kind   `json:"kinds"`
					Options []option `json:"options"`
				}
				var out []entry
				for _, name := range reg.Names() {
					d, _ := reg.Lookup(name)
					e := entry{Name: d.Name, Doc: d.Doc}
					for _, k := range d.Kinds.List() {
						e.Kinds = append(e.Kinds, kind{k.Name, string(k.Pool), k.Doc})
					}
					for _, o := range d.Options {
						e.Options = append(e.Options, option{o.Name, o.Default, o.Usage, o.Asker != nil})
					}
					out = append(out, e)
				}
				enc := json.NewEncoder(w)
				enc.SetIndent("", "  ")
				return enc.Encode(out)
			}
			for _, name := range reg.Names() {
				d, _ := reg.Lookup(name)
				def := ""
				if name == reg.Default() {
					def = " (default)"
				}
				fmt.Fprintf(w, "%s%s: %s\n", d.Name, def, d.Doc)
				tw := tabwriter.NewWriter(w, 2, 4, 2, ' ', 0)
				fmt.Fprintln(tw, "  task kind\tpool\t")
				for _, k := range d.Kinds.List() {
					fmt.Fprintf(tw, "  %s\t%s\t%s\n", k.Name, k.Pool, k.Doc)
				}
				tw.Flush()
				tw = tabwriter.NewWriter(w, 2, 4, 2, ' ', 0)
				fmt.Fprintln(tw, "  option\tdefault\t(* a question may set it)")
				for _, o := range d.Options {
					mark := ""
					if o.Asker != nil {
						mark = " *"
					}
					fmt.Fprintf(tw, "  %s%s\t%s\t%s\n", o.Name, mark, o.Default, o.Usage)
				}
				tw.Flush()
			}
			return nil
		},
	}
	cmd.Flags().BoolVar(&asJSON, "json", false, "print JSON")
	return cmd
}
