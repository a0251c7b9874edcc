// Command coordinator is quorum's coordinator role (see quorum coordinator --help).
package main

import "github.com/quorumsql/quorum/internal/cli"

func main() { cli.Main(cli.RoleCmd("coordinator")) }
