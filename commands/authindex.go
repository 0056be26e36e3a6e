package commands

import (
	"sync"

	"taskledger/events"
	"taskledger/ledger"
	"taskledger/projections"
)

// authIndex is what authentication needs of the committed log: device
// token hash → principal of every ACTIVE device. Requests read it without
// waiting for the sequencer (which holds the projections' write lock while
// a batch commits); the committer updates it after each commit, before
// answering any command of the batch.
type authIndex struct {
	active sync.Map          // token hash → Principal
	hashOf map[string]string // device id → token hash; only the committer (and load) touch it
}

// load indexes every device of s (at start).
func (a *authIndex) load(s *projections.State) {
	a.hashOf = make(map[string]string, len(s.Devices))
	for _, d := range s.Devices {
		a.hashOf[d.ID] = d.TokenHash
		if d.Status == projections.DeviceStatusActive {
			a.active.Store(d.TokenHash, Principal{DeviceID: d.ID, OwnerID: d.OwnerID})
		}
	}
}

// apply indexes the registrations and revocations of committed events
// (bodies[i] is evs[i]'s decoded body).
func (a *authIndex) apply(evs []*ledger.Event, bodies []any) {
	for i := range evs {
		switch b := bodies[i].(type) {
		case *events.DeviceRegistered:
			a.hashOf[b.DeviceID] = b.TokenHash
			a.active.Store(b.TokenHash, Principal{DeviceID: b.DeviceID, OwnerID: b.OwnerID})
		case *events.DeviceRevoked:
			if h, ok := a.hashOf[b.DeviceID]; ok {
				a.active.Delete(h)
			}
		}
	}
}

// lookup returns the active device whose token hashes to h.
func (a *authIndex) lookup(h string) (Principal, bool) {
	v, ok := a.active.Load(h)
	if !ok {
		return Principal{}, false
	}
	return v.(Principal), true
}
