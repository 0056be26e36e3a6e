package projections

import (
	"taskledger/ledger"
)

// Takeover policies of an authorization: what happens to a CLAIMED task
// whose claim lease expired, or whose holder was revoked, before it started.
const (
	// TakeoverReclaim: the next claim-next may take the task over.
	TakeoverReclaim = "reclaim"
	// TakeoverManual: no device may claim it; the task needs an operator.
	TakeoverManual = "manual"
)

// ManualTakeover reports whether t's authorization forbids an automatic
// takeover of its claim. Authorizations written before the policy existed
// ("" in the log) reclaim.
func (t *Task) ManualTakeover() bool {
	return t.Auth != nil && t.Auth.Takeover == TakeoverManual
}

// Reasons an open task needs an operator (the task detail's
// needs_operator_reason): no device may move it any more, and recover
// (fail or requeue) ends it. Wire values: only ever appended.
const (
	// OperatorManualTakeover: CLAIMED under the manual takeover policy and
	// its claim lease expired.
	OperatorManualTakeover = "manual_takeover"
	// OperatorDeviceRevoked: its holder was revoked while it was executing,
	// or while it was CLAIMED under the manual takeover policy.
	OperatorDeviceRevoked = "device_revoked"
	// OperatorAuthorizationExpired: CLAIMED, its claim lease expired, and
	// its authorization no longer allows a claim (the lease ended with it,
	// as it is capped by it): no device may take it over.
	OperatorAuthorizationExpired = "authorization_expired"
	// OperatorRunningLeaseExpired: RUNNING or WAITING_CONFIRMATION and its
	// running lease expired: the device can no longer act on it.
	OperatorRunningLeaseExpired = "running_lease_expired"
)

// AllOperatorReasons lists every needs_operator_reason, in wire order.
func AllOperatorReasons() []string {
	return []string{OperatorManualTakeover, OperatorDeviceRevoked, OperatorAuthorizationExpired, OperatorRunningLeaseExpired}
}

// OperatorReason returns why t needs an operator at now, or "" when a
// device may still move it (or it is PENDING or ended). Every reason is
// one recover accepts.
func (s *State) OperatorReason(t *Task, now int64) string {
	if !t.Open() || t.Claim == nil {
		return ""
	}
	d := s.Devices[t.Claim.DeviceID]
	revoked := d != nil && d.Status == DeviceStatusRevoked
	if t.Started() {
		switch {
		case revoked:
			return OperatorDeviceRevoked
		case t.Exec != nil && now >= t.Exec.Lease():
			return OperatorRunningLeaseExpired
		}
		return ""
	}
	switch {
	case t.ManualTakeover() && now >= t.Claim.LeaseExpiresAt:
		return OperatorManualTakeover
	case t.ManualTakeover() && revoked:
		return OperatorDeviceRevoked
	case now >= t.Claim.LeaseExpiresAt && !t.Eligible(now):
		return OperatorAuthorizationExpired
	}
	return ""
}

// NeedsOperator reports whether t needs an operator at now: it has an
// OperatorReason.
func (s *State) NeedsOperator(t *Task, now int64) bool {
	return s.OperatorReason(t, now) != ""
}

// HeldTasks calls fn for every task a device holds (CLAIMED, RUNNING,
// WAITING_CONFIRMATION), until fn returns false. A device holds at most
// one, so the set stays as small as the fleet; it backs the
// needs_operator list filter and metric without walking every task.
func (s *State) HeldTasks(fn func(t *Task) bool) {
	for id := range s.heldTasks {
		if t := s.Tasks[id]; t != nil && !fn(t) {
			return
		}
	}
}

// NeedingOperator counts the tasks that need an operator at now.
func (s *State) NeedingOperator(now int64) int {
	n := 0
	s.HeldTasks(func(t *Task) bool {
		if s.NeedsOperator(t, now) {
			n++
		}
		return true
	})
	return n
}

// trackHeld keeps t's membership of the held-task set current.
func (s *State) trackHeld(t *Task) {
	if t.Open() && t.Claim != nil {
		if s.heldTasks == nil {
			s.heldTasks = map[string]struct{}{}
		}
		s.heldTasks[t.ID] = struct{}{}
		return
	}
	delete(s.heldTasks, t.ID)
}

// takeoverRefused is the replay check of a claim of t at e: a CLAIMED task
// under the manual policy is never taken over, whatever its lease.
func takeoverRefused(t *Task, e *ledger.Event) error {
	if t.State == StateClaimed && t.ManualTakeover() {
		return violation("task %s taken over at %d under the manual takeover policy", t.ID, e.At)
	}
	return nil
}

// recoverableClaim reports whether an operator may recover t, CLAIMED by an
// active device, at now: once the claim lease expired, under the manual
// policy or when its authorization no longer allows a claim (under reclaim
// with an eligible authorization the next claim or an operator command
// closes it).
func recoverableClaim(t *Task, now int64) bool {
	return t.State == StateClaimed && t.Claim != nil && now >= t.Claim.LeaseExpiresAt &&
		(t.ManualTakeover() || !t.Eligible(now))
}

// ClaimableCount is the queue depth at now: how many tasks a claim-next
// could take (Task.Claimable), counted over the tasks not ended.
func (s *State) ClaimableCount(now int64) int {
	n := 0
	for _, t := range s.unended {
		if t.Claimable(now) {
			n++
		}
	}
	return n
}
