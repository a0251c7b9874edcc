// Command explorer-worker is quorum's explorer-worker role (see quorum explorer-worker --help).
package main

import "github.com/quorumsql/quorum/internal/cli"

func main() { cli.Main(cli.RoleCmd("explorer-worker")) }
