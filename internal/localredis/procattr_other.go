//go:build !linux

package localredis

import "syscall"

// procAttr puts the server in its own process group; only Linux can also
// tie its life to quorum's.
func procAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Setpgid: true}
}
