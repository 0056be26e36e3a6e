package node

import (
	"taskledger/api"
	"taskledger/events"
	"taskledger/ledger"
)

// observeLeases returns the sequencer hook that counts the lease expiries
// the committed events show: a claim taken over from another device after
// its claim lease expired, or a stale claim an operator command closed
// (claim); a complete/fail reported after the running lease expired
// (running). It reads the bodies the sequencer built (bodies[i] is
// evs[i]'s), so nothing is decoded again.
func observeLeases(m *api.Metrics) func(evs []*ledger.Event, bodies []any) {
	return func(evs []*ledger.Event, bodies []any) {
		for i, e := range evs {
			if e.Type == events.EvTaskLateReport {
				m.ObserveLeaseExpiry(api.LeaseRunning)
			} else if i < len(bodies) && closedStaleClaim(bodies[i]) {
				m.ObserveLeaseExpiry(api.LeaseClaim)
			}
		}
	}
}

func closedStaleClaim(body any) bool {
	switch b := body.(type) {
	case *events.TaskClaimed:
		return b.PreviousDeviceID != ""
	case *events.TaskAmended:
		return b.Closed != nil
	case *events.TaskReferenceImageSet:
		return b.Closed != nil
	case *events.TaskAuthorized:
		return b.Closed != nil
	case *events.TaskAuthorizationRevoked:
		return b.Closed != nil
	}
	return false
}
