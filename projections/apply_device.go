package projections

import (
	"taskledger/events"
	"taskledger/ledger"
)

// The fold of devices: registered, revoked, and claims their open task blocked.

func (s *State) applyDeviceRegistered(e *ledger.Event, b *events.DeviceRegistered) error {
	if _, dup := s.Devices[b.DeviceID]; dup {
		return violation("device %s exists", b.DeviceID)
	}
	if _, dup := s.byTokenHash[b.TokenHash]; dup {
		return violation("device %s reuses a token", b.DeviceID)
	}
	if e.Stream != events.DeviceStream(b.DeviceID) || e.StreamVersion != 1 {
		return violation("device.registered on stream %s/%d", e.Stream, e.StreamVersion)
	}
	d := &Device{ID: b.DeviceID, OwnerID: b.OwnerID, Name: b.Name, HasChecks: b.HasChecks,
		RequiredChecks: b.RequiredChecks, TokenHash: b.TokenHash, Status: DeviceStatusActive, RegisteredAt: e.At, StreamVersion: 1}
	s.Devices[d.ID] = d
	s.byTokenHash[d.TokenHash] = d.ID
	s.recordDevice(e, d.ID, OutcomeCreated)
	return nil
}

func (s *State) applyDeviceRevoked(e *ledger.Event, b *events.DeviceRevoked) error {
	d, err := s.device(e, b.DeviceID)
	if err != nil {
		return err
	}
	if d.Status != DeviceStatusActive {
		return violation("device %s is already revoked", d.ID)
	}
	d.Status, d.RevokedAt, d.RevokeReason = DeviceStatusRevoked, e.At, b.Reason
	d.StreamVersion = e.StreamVersion
	s.recordDevice(e, d.ID, OutcomeAccepted)
	return nil
}

func (s *State) applyDeviceClaimRequiresManual(e *ledger.Event, b *events.DeviceClaimRequiresManual) error {
	d, err := s.device(e, b.DeviceID)
	if err != nil {
		return err
	}
	d.StreamVersion = e.StreamVersion
	r := &Reply{TaskID: b.TaskID, ServerTime: e.At, SessionID: b.SessionID}
	s.put(e, &IdemRecord{Outcome: OutcomeRefused, Code: "claim_requires_manual", DeviceID: d.ID, TaskID: b.TaskID, Reply: r})
	return nil
}
