// Package layout holds no code: its test checks the import rules that keep
// quorum's folders reading as its data flow (docs/architecture.md, "Where
// things are"):
//
//   - pkg/ is what someone outside the module needs to write, test and run
//     an agent: the agent seam (pkg/runtime/agent), the in-process runner
//     (pkg/runtime/local), the trace of what an agent did (pkg/trace), the
//     agents and their test kit (pkg/agents/...),
//     and the libraries they stand on (llm, reply, warehouse/..., dataset,
//     eval, cost, outputs, sqltext, pyrepr, priority, slot) and the simulated
//     LLM agents are tested against (pkg/llmsim). It imports
//     internal/ only where pkgToInternal says why. The role assembly
//     (internal/runtime/cluster) and the warehouses' registry and live
//     schemas (internal/warehouse/...) are machinery.
//   - internal/ is the machinery (the roles, their messages and state, the
//     queue, Redis, quotas) and the applications built on it
//     (internal/app/bench, internal/app/serve), which only the commands
//     (internal/cli) start.
//   - a dataset is data: pkg/dataset names dialects (pkg/sqltext) and imports
//     neither the warehouses nor the evaluator.
//   - the seam imports no machinery, and an agent reaches the runtime only
//     through it.
//
// Its other test (clock_test.go) keeps the wall clock out of the tests
// (issue 51): no time.Sleep, time.Since, time.Until or compared Sub in a
// *_test.go file outside a synctest bubble, unless a //clock:ok comment
// says why it asserts nothing about elapsed time.
package layout
