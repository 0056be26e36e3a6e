package projections

import (
	"sort"

	"taskledger/events"
	"taskledger/ledger"
	"taskledger/wire"
)

// The fold of admin tokens created and revoked through the log.
//
// An admin token also exists outside the log: the ledger's initial token
// (and tokens an older release created offline) are meta records beside
// it. A name the log speaks of is the log's from then on: its first event
// may be a revocation of such a token, and whatever the meta record says,
// the token of that name is the one this projection holds, or none.

// Admin token statuses.
const (
	AdminTokenActive  = "ACTIVE"
	AdminTokenRevoked = "REVOKED"
)

// AdminToken is one admin token name as the log left it.
type AdminToken struct {
	Name          string
	TokenHash     string // "" after a revocation: the log no longer names it
	Status        string
	Role          wire.Role // RoleAdmin for a token created before roles
	CreatedAt     int64     // 0: the first event revoked a token held outside the log
	CreatedBy     string
	RevokedAt     int64
	RevokedBy     string
	RevokeReason  string
	StreamVersion uint64
}

func (s *State) adminToken(e *ledger.Event, name string) (*AdminToken, error) {
	a := s.AdminTokens[name]
	var v uint64
	if a != nil {
		v = a.StreamVersion
	}
	if e.Stream != events.AdminTokenStream(name) || e.StreamVersion != v+1 {
		return nil, violation("stream %s/%d does not continue admin token %s at %d", e.Stream, e.StreamVersion, name, v)
	}
	return a, nil
}

func (s *State) applyAdminTokenCreated(e *ledger.Event, b *events.AdminTokenCreated) error {
	a, err := s.adminToken(e, b.Name)
	if err != nil {
		return err
	}
	if a != nil && a.Status == AdminTokenActive {
		return violation("admin token %s exists", b.Name)
	}
	if _, dup := s.byTokenHash[b.TokenHash]; dup {
		return violation("admin token %s reuses a device token", b.Name)
	}
	for _, o := range s.AdminTokens {
		if o.Status == AdminTokenActive && o.TokenHash == b.TokenHash {
			return violation("admin token %s reuses the token of %s", b.Name, o.Name)
		}
	}
	role, ok := wire.ParseRole(b.Role)
	if !ok {
		return violation("admin token %s has the unknown role %q", b.Name, b.Role)
	}
	s.AdminTokens[b.Name] = &AdminToken{Name: b.Name, TokenHash: b.TokenHash, Status: AdminTokenActive, Role: role,
		CreatedAt: e.At, CreatedBy: e.Actor.ID, StreamVersion: e.StreamVersion}
	s.recordAdmin(e, OutcomeCreated)
	return nil
}

func (s *State) applyAdminTokenRevoked(e *ledger.Event, b *events.AdminTokenRevoked) error {
	a, err := s.adminToken(e, b.Name)
	if err != nil {
		return err
	}
	switch {
	case a == nil:
		// The first word of the log on a token held outside it.
		a = &AdminToken{Name: b.Name}
		s.AdminTokens[b.Name] = a
	case a.Status != AdminTokenActive:
		return violation("admin token %s is already revoked", b.Name)
	}
	if a.Role == "" {
		a.Role = wire.RoleAdmin // a token held outside the log was an admin token
	}
	a.Status, a.TokenHash, a.RevokedAt, a.RevokedBy, a.RevokeReason = AdminTokenRevoked, "", e.At, e.Actor.ID, b.Reason
	a.StreamVersion = e.StreamVersion
	s.recordAdmin(e, OutcomeAccepted)
	return nil
}

func (s *State) recordAdmin(e *ledger.Event, o Outcome) {
	if e.Idem == nil {
		return
	}
	s.put(e, &IdemRecord{Outcome: o})
}

// AdminTokensInOrder calls fn for every admin token the log names, by name.
func (s *State) AdminTokensInOrder(fn func(a *AdminToken)) {
	names := make([]string, 0, len(s.AdminTokens))
	for n := range s.AdminTokens {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, n := range names {
		fn(s.AdminTokens[n])
	}
}
