// Command voter is quorum's voter role (see quorum voter --help).
package main

import "github.com/quorumsql/quorum/internal/cli"

func main() { cli.Main(cli.RoleCmd("voter")) }
