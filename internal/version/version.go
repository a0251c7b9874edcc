// Package version says which quorum wrote something: the version stamped
// at build time and the source revision Go records in the binary.
package version

import (
	"runtime/debug"
	"strings"
)

// Version is stamped at build time with -ldflags "-X
// github.com/quorumsql/quorum/internal/version.Version=..." (make build:
// git describe); "dev" otherwise.
var Version = "dev"

// Revision is the source revision the binary was built from (12 hex
// digits, "+modified" when the tree had uncommitted changes), from the
// build information Go records; "" when it recorded none (go run, a
// build outside a git checkout, -buildvcs=false).
func Revision() string {
	info, ok := debug.ReadBuildInfo()
	if !ok {
		return ""
	}
	var rev string
	modified := false
	for _, s := range info.Settings {
		switch s.Key {
		case "vcs.revision":
			rev = s.Value
		case "vcs.modified":
			modified = s.Value == "true"
		}
	}
	if rev == "" {
		return ""
	}
	rev = rev[:min(12, len(rev))]
	if modified {
		rev += "+modified"
	}
	return strings.TrimSpace(rev)
}

// String is the version with its revision when one is recorded:
// "v1.2.0 (0123456789ab)".
func String() string {
	if r := Revision(); r != "" {
		return Version + " (" + r + ")"
	}
	return Version
}
