package commands

import (
	"sync"

	"taskledger/events"
	"taskledger/ledger"
	"taskledger/projections"
	"taskledger/wire"
)

// authIndex is what authentication needs of the committed log: device
// token hash → principal of every ACTIVE device, and admin token hash →
// name of every active admin token. Requests read it without
// waiting for the sequencer (which holds the projections' write lock while
// a batch commits); the committer updates it after each commit, before
// answering any command of the batch.
type authIndex struct {
	active sync.Map          // token hash → Principal
	hashOf map[string]string // device id → token hash; only the committer (and load) touch it
	// admins: token hash → AdminIdentity, of every active admin token;
	// adminHash: name → token hash (committer only).
	admins    sync.Map
	adminHash map[string]string
}

// load indexes every device and admin token of s, and the admin tokens
// held outside the log that it never spoke of (at start).
func (a *authIndex) load(s *projections.State, outside map[string]string) {
	a.adminHash = map[string]string{}
	for name, h := range outside {
		if s.AdminTokens[name] == nil {
			a.adminHash[name] = h
			a.admins.Store(h, AdminIdentity{Name: name, Role: wire.RoleAdmin})
		}
	}
	for _, t := range s.AdminTokens {
		if t.Status == projections.AdminTokenActive {
			a.adminHash[t.Name] = t.TokenHash
			a.admins.Store(t.TokenHash, AdminIdentity{Name: t.Name, Role: t.Role})
		}
	}
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
		case *events.AdminTokenCreated:
			role, _ := wire.ParseRole(b.Role)
			a.adminHash[b.Name] = b.TokenHash
			a.admins.Store(b.TokenHash, AdminIdentity{Name: b.Name, Role: role})
		case *events.AdminTokenRevoked:
			if h, ok := a.adminHash[b.Name]; ok {
				a.admins.Delete(h)
				delete(a.adminHash, b.Name)
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

// AdminIdentity is an active admin token as authentication sees it.
type AdminIdentity struct {
	Name string
	Role wire.Role
}

// lookupAdmin returns the active admin token that hashes to h.
func (a *authIndex) lookupAdmin(h string) (AdminIdentity, bool) {
	v, ok := a.admins.Load(h)
	if !ok {
		return AdminIdentity{}, false
	}
	return v.(AdminIdentity), true
}
