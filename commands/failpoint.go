package commands

import (
	"os"

	"taskledger/events"
	"taskledger/ledger"
)

// Failpoints let crash tests of the real binary stop the process at an
// exact point of the commit path (STYLE.md §15). The environment variable
// TASKLEDGER_FAILPOINT is read once at start; unset, a failpoint costs one
// string comparison per committed batch.
//
//	kill-after-claim-commit  the process SIGKILLs itself right after a batch
//	                         holding a task.claimed event committed, before
//	                         any command of that batch is answered (a crash
//	                         between a claim's commit and its response).
const FailpointKillAfterClaimCommit = "kill-after-claim-commit"

var failpoint = os.Getenv("TASKLEDGER_FAILPOINT")

// afterCommit runs the failpoints of a committed batch.
func afterCommit(evs []*ledger.Event) {
	if failpoint != FailpointKillAfterClaimCommit {
		return
	}
	for _, ev := range evs {
		if ev.Type == events.EvTaskClaimed {
			if p, err := os.FindProcess(os.Getpid()); err == nil {
				_ = p.Kill() // SIGKILL: no deferred code, no answer
			}
			select {} // never answer, even if the signal is slow to land
		}
	}
}
