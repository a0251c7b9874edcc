// Package agenttest is the test kit of the agent seam (pkg/runtime/agent):
// what an agent's tests need, so that no agent writes its own, in the
// spirit of River's rivertest.
//
//   - A scripted model (Model): an llm.Client whose replies the test
//     writes — by rule (Script, Texts), in sequence (Replies), failing
//     (Down) — or a real client's, recorded (Record); every request is
//     kept. Replies come in the shapes real models write (Shapes,
//     Unreadable, Fence, Think, Cut, Reasoned, ToolCalls).
//   - A SQLite fixture: a tiny read-only database built from a script
//     (SQLite), a whole Spider 2.0-lite dataset around one (NewDataset),
//     or the repository's demo (Demo), each a Fixture with its
//     warehouses.
//   - The runtime's side in memory: the context a task or a decision
//     sees (Context, with local.Store), a shared cache (Cache), llmsim
//     over HTTP (Sim).
//   - Run, which runs an agent's definition over a fixture in process
//     through pkg/runtime/local, as quorum solve does, and
//     CheckDefinition, which checks what the runtime requires of one.
//   - RunPolicies, which runs one under fixed and then adaptive sampling
//     against llmsim, and ComparePolicies, which checks what holds of
//     any agent's two runs and hands each example to the agent's checks.
//
// docs/agents/writing-an-agent.md writes an agent with it.
package agenttest
