// Command generator-worker is quorum's generator-worker role (see quorum generator-worker --help).
package main

import "github.com/quorumsql/quorum/internal/cli"

func main() { cli.Main(cli.RoleCmd("generator-worker")) }
