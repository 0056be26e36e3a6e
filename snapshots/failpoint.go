package snapshots

import (
	"os"
	"strings"
)

// Failpoints end the process with SIGKILL (TerminateProcess on Windows) at
// a point of the snapshot write, to prove a crash there leaves the previous
// snapshot loadable. They are enabled by naming them, comma-separated, in
// the TASKLEDGER_FAILPOINT environment variable; tests of the real binary
// use them.
const (
	// FailMidWrite kills the process after half of the content was written
	// to the .tmp file.
	FailMidWrite = "snapshot-mid-write"
	// FailAfterTmpWrite kills the process after the .tmp file was written
	// and fsynced, before the rename.
	FailAfterTmpWrite = "snapshot-after-tmp-write"
)

// FailpointEnv is the environment variable that enables failpoints.
const FailpointEnv = "TASKLEDGER_FAILPOINT"

var failpoints = os.Getenv(FailpointEnv)

func active(name string) bool {
	if failpoints == "" {
		return false
	}
	for _, f := range strings.Split(failpoints, ",") {
		if strings.TrimSpace(f) == name {
			return true
		}
	}
	return false
}

// crash ends the process at once, as SIGKILL would: no deferred function
// runs and no buffer is flushed.
func crash() {
	if p, err := os.FindProcess(os.Getpid()); err == nil {
		_ = p.Kill()
	}
	os.Exit(137) // not reached where Kill works
}
