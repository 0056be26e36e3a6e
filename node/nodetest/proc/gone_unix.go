//go:build unix

package proc

import "syscall"

// processGone reports whether no process has the id pid (its binary
// directory may go).
func processGone(pid int) bool { return syscall.Kill(pid, 0) == syscall.ESRCH }
