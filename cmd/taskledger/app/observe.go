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
// (running). Only the few event types that can show one are decoded.
func observeLeases(m *api.Metrics) func(events []*ledger.Event) {
	return func(events []*ledger.Event) {
		for _, e := range events {
			switch e.Type {
			case projections.EvTaskLateReport:
				m.ObserveLeaseExpiry(api.LeaseRunning)
			case projections.EvTaskClaimed, projections.EvTaskAmended, projections.EvTaskReferenceImageSet,
				projections.EvTaskAuthorized, projections.EvTaskAuthorizationRevoked:
				b, err := projections.DecodeBody(e.Type, e.Schema, e.Body)
				if err != nil {
					continue
				}
				if closedStaleClaim(b) {
					m.ObserveLeaseExpiry(api.LeaseClaim)
				}
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
