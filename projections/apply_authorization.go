package projections

import (
	"taskledger/events"
	"taskledger/ledger"
)

// The fold of authorizations: granted and revoked by operators, consumed by a start.

func (s *State) applyAuthorized(e *ledger.Event, b *events.TaskAuthorized) error {
	t, err := s.task(e, b.TaskID)
	if err != nil {
		return err
	}
	if err := s.closeStaleClaim(t, b.Closed, b.Version, e.At); err != nil {
		return err
	}
	t.Auth = &Authorization{AuthBody: b.Authorization, Status: AuthActive, CreatedAt: e.At, Takeover: b.Takeover}
	s.touch(t, e)
	s.record(e, t, nil, OutcomeAccepted)
	return nil
}

func (s *State) applyAuthorizationRevoked(e *ledger.Event, b *events.TaskAuthorizationRevoked) error {
	t, err := s.task(e, b.TaskID)
	if err != nil {
		return err
	}
	if t.Auth == nil || t.Auth.ID != b.AuthorizationID || t.Auth.Status != AuthActive {
		return violation("task %s has no active authorization %s", t.ID, b.AuthorizationID)
	}
	if err := s.closeStaleClaim(t, b.Closed, b.Version, e.At); err != nil {
		return err
	}
	t.Auth.Status = AuthRevoked
	s.touch(t, e)
	s.record(e, t, nil, OutcomeAccepted)
	return nil
}
