package commands

import (
	"taskledger/events"
	"taskledger/internal/failpoint"
	"taskledger/ledger"
)

// afterCommit runs the failpoints of a committed batch (STYLE.md §15):
// failpoint.ClaimCommitted kills the process right after a batch holding a
// task.claimed event committed, before any command of that batch is
// answered (a crash between a claim's commit and its response). Builds
// without the failpoints tag compile this to nothing.
func afterCommit(evs []*ledger.Event) {
	if !failpoint.Enabled {
		return
	}
	for _, ev := range evs {
		if ev.Type == events.EvTaskClaimed {
			_ = failpoint.Eval(failpoint.ClaimCommitted) // kill only
		}
	}
}
