package projections

import (
	"taskledger/events"
	"taskledger/ledger"
)

// The fold of claims: taken, resumed, renewed and released by devices.

func (s *State) applyClaimResumed(e *ledger.Event, b *events.TaskClaimResumed) error {
	t, err := s.task(e, b.TaskID)
	if err != nil {
		return err
	}
	if err := holder(t, b.DeviceID, b.Generation, "", StateClaimed); err != nil {
		return err
	}
	if e.At >= t.Claim.LeaseExpiresAt || t.Claim.SessionID != b.SessionID || t.Claim.LeaseExpiresAt != b.LeaseExpiresAt {
		return violation("task %s claim cannot be resumed", t.ID)
	}
	s.touchStream(t, e)
	s.record(e, t, claimReply(t, e.At), OutcomeAccepted)
	return nil
}

func (s *State) applyClaimRenewed(e *ledger.Event, b *events.TaskClaimRenewed) error {
	t, err := s.task(e, b.TaskID)
	if err != nil {
		return err
	}
	if err := holder(t, b.DeviceID, b.Generation, "", StateClaimed); err != nil {
		return err
	}
	if e.At >= t.Claim.LeaseExpiresAt || t.Claim.LeaseExpiresAt != b.PreviousExpiresAt {
		return violation("task %s claim lease expired or moved before renew", t.ID)
	}
	if b.LeaseExpiresAt > t.Claim.AuthorizationExpiresAt {
		return violation("task %s claim lease outlives its authorization", t.ID)
	}
	t.Claim.LeaseExpiresAt = b.LeaseExpiresAt
	s.reindex(t)
	s.touchStream(t, e)
	s.record(e, t, taskReply(t, e.At), OutcomeAccepted)
	return nil
}

func (s *State) applyReleased(e *ledger.Event, b *events.TaskReleased) error {
	t, err := s.task(e, b.TaskID)
	if err != nil {
		return err
	}
	if err := holder(t, b.DeviceID, b.Generation, "", StateClaimed); err != nil {
		return err
	}
	if err := checkVersion(t, b.Version); err != nil {
		return err
	}
	s.releaseDevice(t)
	t.State, t.Version, t.Claim = StatePending, b.Version, nil
	s.touch(t, e)
	s.record(e, t, taskReply(t, e.At), OutcomeAccepted)
	return nil
}
