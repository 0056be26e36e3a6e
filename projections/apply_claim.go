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
	r := claimReply(t, e.At)
	s.record(e, t, &r, OutcomeAccepted)
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
	r := taskReply(t, e.At)
	s.record(e, t, &r, OutcomeAccepted)
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
	r := taskReply(t, e.At)
	s.record(e, t, &r, OutcomeAccepted)
	return nil
}

func (s *State) applyClaimed(e *ledger.Event, b *events.TaskClaimed) error {
	t, err := s.task(e, b.TaskID)
	if err != nil {
		return err
	}
	d := s.Devices[b.DeviceID]
	if d == nil || d.Status != DeviceStatusActive {
		return violation("task %s claimed by device %s that is not active", t.ID, b.DeviceID)
	}
	switch t.State {
	case StatePending:
	case StateClaimed:
		if e.At < t.Claim.LeaseExpiresAt {
			return violation("task %s claimed by %s while %s holds an unexpired claim", t.ID, b.DeviceID, t.Claim.DeviceID)
		}
		if err := takeoverRefused(t, e); err != nil {
			return err
		}
	default:
		return violation("task %s claimed in %s", t.ID, t.State)
	}
	if !t.Eligible(e.At) || t.Auth.ID != b.AuthorizationID {
		return violation("task %s claimed without an eligible authorization", t.ID)
	}
	if other := d.OpenTask; other != "" && other != t.ID {
		o := s.Tasks[other]
		if o != nil && o.Claim != nil && o.Claim.DeviceID == d.ID && (o.Started() || e.At < o.Claim.LeaseExpiresAt) {
			return violation("device %s claims %s while it holds %s", d.ID, t.ID, other)
		}
	}
	if b.Generation != t.Generation+1 {
		return violation("task %s generation %d after %d", t.ID, b.Generation, t.Generation)
	}
	if err := checkVersion(t, b.Version); err != nil {
		return err
	}
	if b.LeaseExpiresAt > t.Auth.ExpiresAt || b.LeaseExpiresAt <= e.At {
		return violation("task %s claim lease outside its authorization", t.ID)
	}
	if b.TokenOrigin == events.TokenServer && s.claimKeyCheck != "" && b.SecretCheck != s.claimKeyCheck {
		return violation("task %s claimed with a server-issued token of another secret (secret_check %q)", t.ID, b.SecretCheck)
	}
	s.releaseDevice(t) // a stale claim of another device (or this one) closes
	t.State, t.Version, t.Generation = StateClaimed, b.Version, b.Generation
	t.Claim = &Claim{Generation: b.Generation, DeviceID: b.DeviceID, SessionID: b.SessionID,
		LeaseExpiresAt: b.LeaseExpiresAt, TokenOrigin: b.TokenOrigin, TokenHash: b.TokenHash, Nonce: b.Nonce,
		AuthorizationID: b.AuthorizationID, AuthorizationExpiresAt: b.AuthorizationExpiresAt, ClaimedAt: e.At}
	d.OpenTask = t.ID
	if b.TokenOrigin == events.TokenServer {
		s.ServerClaims++
	}
	s.touch(t, e)
	r := claimReply(t, e.At)
	s.record(e, t, &r, OutcomeAccepted)
	return nil
}
