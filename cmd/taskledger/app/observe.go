package app

import (
	"taskledger/api"
	"taskledger/ledger"
	"taskledger/projections"
)

// observeLeases returns the sequencer hook that counts the lease expiries
// the committed events show: a claim taken over from another device after
// its claim lease expired, or a stale claim an operator command closed
// (claim); a complete/fail reported after the running lease expired
// (running). It reads the bodies the sequencer built (bodies[i] is
// events[i]'s), so nothing is decoded again.
func observeLeases(m *api.Metrics) func(events []*ledger.Event, bodies []any) {
	return func(events []*ledger.Event, bodies []any) {
		for i, e := range events {
			if e.Type == projections.EvTaskLateReport {
				m.ObserveLeaseExpiry(api.LeaseRunning)
			} else if i < len(bodies) && closedStaleClaim(bodies[i]) {
				m.ObserveLeaseExpiry(api.LeaseClaim)
			}
		}
	}
}

func closedStaleClaim(body any) bool {
	switch b := body.(type) {
	case *projections.TaskClaimed:
		return b.PreviousDeviceID != ""
	case *projections.TaskAmended:
		return b.Closed != nil
	case *projections.TaskReferenceImageSet:
		return b.Closed != nil
	case *projections.TaskAuthorized:
		return b.Closed != nil
	case *projections.TaskAuthorizationRevoked:
		return b.Closed != nil
	}
	return false
}
