package commands

import "taskledger/projections"

// keepCommittedPresence carries the live presence of devices over a reload
// after a failed commit. A reload reads presence from disk marked Restored
// (a restarted server waits for the next heartbeat), which would make every
// device not ready because one commit failed. A device whose in-memory
// presence is the one on disk (same receive time: it was committed) keeps
// it as live; a presence of the failed batch was never written and is not
// carried over (nothing unacknowledged becomes visible).
func keepCommittedPresence(old, fresh *projections.State) {
	if old == nil || fresh == nil {
		return
	}
	for id, p := range fresh.Presence {
		o := old.Presence[id]
		if o == nil || o.Restored || !p.Restored || o.ReceivedAt != p.ReceivedAt {
			continue
		}
		q := *p
		q.Restored = false
		fresh.Presence[id] = &q
	}
}
