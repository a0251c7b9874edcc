// Command quorum is the user's entry point: inspect datasets, evaluate
// predictions, run the agents in one process or over a cluster, and serve
// the simulated LLM.
package main

import "github.com/quorumsql/quorum/internal/cli"

func main() { cli.Main(cli.NewRootCmd()) }
