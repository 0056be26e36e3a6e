package commands

import "taskledger/projections"

// Precheck runs a task-scoped call's checks against the committed
// projections s at now, without deciding anything: what an upload checks
// before it stores a byte. It returns recorded when the call's key already
// has an idempotency record (or had one that expired): the replay, the
// conflict or the expiry is then decided with the request's fingerprint,
// which needs the body. Otherwise it returns the refusal Decide would give
// now (nil when the call would be accepted). The sequencer decides again:
// the state may change between the two.
func (c *TaskCall) Precheck(s *projections.State, now int64, cfg *Config) (recorded bool, err error) {
	x := &Ctx{State: s, Now: now, Cfg: cfg, IDs: func() string { return "" }}
	if _, err := activeDevice(x, c.Device); err != nil {
		return false, err
	}
	scope := Scope(c.Device.Actor(), c.Op)
	if rec, expired := s.Idem.Lookup(scope, c.Key, s.Head.At, cfg.IdempotencyRetention.Milliseconds()); rec != nil || expired {
		return true, nil
	}
	probe := *c
	probe.RecordedOnly = false
	if probe.Op == OpEvidence {
		probe.Evidence = &projections.Evidence{}
	}
	_, err = probe.Decide(x)
	return false, err
}
