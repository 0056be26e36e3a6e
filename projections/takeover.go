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

// NeedsOperator reports whether t is a CLAIMED task under the manual
// takeover policy whose claim lease expired at now or whose holder was
// revoked: no device may claim it until an operator recovers it.
func (s *State) NeedsOperator(t *Task, now int64) bool {
	if t.State != StateClaimed || t.Claim == nil || !t.ManualTakeover() {
		return false
	}
	if now >= t.Claim.LeaseExpiresAt {
		return true
	}
	d := s.Devices[t.Claim.DeviceID]
	return d != nil && d.Status == DeviceStatusRevoked
}

// ManualClaims calls fn for every CLAIMED task under the manual takeover
// policy, until fn returns false. There is at most one per device, so the
// set stays as small as the fleet; it backs the needs_operator list filter
// and metric without walking every task.
func (s *State) ManualClaims(fn func(t *Task) bool) {
	for id := range s.manualClaims {
		if t := s.Tasks[id]; t != nil && !fn(t) {
			return
		}
	}
}

// NeedingOperator counts the tasks that need an operator at now.
func (s *State) NeedingOperator(now int64) int {
	n := 0
	s.ManualClaims(func(t *Task) bool {
		if s.NeedsOperator(t, now) {
			n++
		}
		return true
	})
	return n
}

// trackManual keeps t's membership of the manual-claim set current.
func (s *State) trackManual(t *Task) {
	if t.State == StateClaimed && t.Claim != nil && t.ManualTakeover() {
		if s.manualClaims == nil {
			s.manualClaims = map[string]struct{}{}
		}
		s.manualClaims[t.ID] = struct{}{}
		return
	}
	delete(s.manualClaims, t.ID)
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
// active device, at now: only under the manual policy, once the claim lease
// expired (under reclaim the next claim or an operator command closes it).
func recoverableClaim(t *Task, now int64) bool {
	return t.State == StateClaimed && t.Claim != nil && t.ManualTakeover() && now >= t.Claim.LeaseExpiresAt
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
