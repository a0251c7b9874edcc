// Package agents lists the agents quorum ships: each lives in its own
// package below this one and plugs into the runtime through the seam in
// pkg/runtime/agent.
package agents

import (
	"github.com/quorumsql/quorum/pkg/agents/ensemble"
	"github.com/quorumsql/quorum/pkg/agents/pexa"
	"github.com/quorumsql/quorum/pkg/agents/raise"
	"github.com/quorumsql/quorum/pkg/agents/reforce"
	"github.com/quorumsql/quorum/pkg/runtime/agent"
)

// Default is the agent a run or a question uses when none is named: the
// registry's default (Builtin registers it first), and the default of
// every --agent flag.
const Default = "reforce"

// Builtin returns a registry of the shipped agents, Default first.
func Builtin() *agent.Registry {
	r, err := agent.NewRegistry(reforce.Definition(), pexa.Definition(), raise.Definition(),
		ensemble.Definition(reforce.Definition(), pexa.Definition(), raise.Definition()))
	if err != nil {
		panic(err) // the shipped definitions are fixed: a test keeps them valid
	}
	return r
}
