package localredis

import "syscall"

// procAttr puts the server in its own process group (a terminal's Ctrl-C
// must reach quorum, which stops its workers first, not the server they
// still write to) and has the kernel kill it if quorum dies (SIGKILL
// included): an orphan would keep its port and write to the append-only
// file the restarted quorum's new server uses.
func procAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
}
