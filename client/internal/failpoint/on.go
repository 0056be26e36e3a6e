//go:build taskledger_failpoints && unix

package failpoint

import (
	"os"
	"syscall"
)

// Hit kills the process with SIGKILL when TASKLEDGER_FAILPOINT names this
// point.
func Hit(name string) {
	if os.Getenv("TASKLEDGER_FAILPOINT") == name {
		_, _ = os.Stderr.WriteString("failpoint " + name + " reached: SIGKILL\n")
		_ = syscall.Kill(os.Getpid(), syscall.SIGKILL)
		select {}
	}
}
