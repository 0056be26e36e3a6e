package projections

import (
	"taskledger/events"
	"taskledger/ledger"
)

// The fold of executions: started, kept alive, paused, finished, late reports and evidence.

func (s *State) applyStarted(e *ledger.Event, b *events.TaskStarted) error {
	t, err := s.task(e, b.TaskID)
	if err != nil {
		return err
	}
	if err := holder(t, b.DeviceID, b.Generation, "", StateClaimed); err != nil {
		return err
	}
	if e.At >= t.Claim.LeaseExpiresAt {
		return violation("task %s started after its claim lease expired", t.ID)
	}
	if t.Auth == nil || t.Auth.ID != b.AuthorizationID || t.Auth.Status != AuthActive || !t.authMatches() {
		return violation("task %s started without its active authorization (one execution per authorization)", t.ID)
	}
	if err := checkVersion(t, b.Version); err != nil {
		return err
	}
	t.Auth.Status = AuthConsumed
	t.State, t.Version = StateRunning, b.Version
	t.Exec = &Execution{ID: b.ExecutionID, StartedAt: e.At, LeaseExpiresAt: b.LeaseExpiresAt, LastSeenAt: e.At}
	t.Executions++
	t.CancelRequested, t.CancelReason = false, ""
	s.touch(t, e)
	r := taskReply(t, e.At)
	s.record(e, t, &r, OutcomeAccepted)
	return nil
}

func (s *State) applyHeartbeat(e *ledger.Event, b *events.TaskHeartbeat) error {
	t, err := s.task(e, b.TaskID)
	if err != nil {
		return err
	}
	if err := holder(t, b.DeviceID, b.Generation, b.ExecutionID, StateRunning, StateWaitingConfirmation); err != nil {
		return err
	}
	prev, err := judgedLease(t, b.PreviousExpiresAt) // 0: schema 1, the events' lease
	if err != nil {
		return err
	}
	if e.At >= prev {
		return violation("task %s heartbeat after its running lease expired", t.ID)
	}
	foldLease(t, b.LeaseExpiresAt, e.At)
	t.Exec.Step = b.Step
	s.touchStream(t, e)
	r := taskReply(t, e.At)
	r.Step = b.Step
	s.record(e, t, &r, OutcomeAccepted)
	return nil
}

func (s *State) applyCompleted(e *ledger.Event, b *events.TaskCompleted) error {
	t, err := s.endExecution(e, b.TaskID, b.DeviceID, b.Generation, b.ExecutionID, b.Version, b.LeaseExpiresAt)
	if err != nil {
		return err
	}
	res := b.Result
	t.Result, t.State = &res, StateSucceeded
	s.finish(t, e)
	return nil
}

func (s *State) applyFailed(e *ledger.Event, b *events.TaskFailed) error {
	t, err := s.endExecution(e, b.TaskID, b.DeviceID, b.Generation, b.ExecutionID, b.Version, b.LeaseExpiresAt)
	if err != nil {
		return err
	}
	t.Failure, t.State = &Failure{ReasonCode: b.ReasonCode, Detail: b.Detail}, StateFailed
	s.finish(t, e)
	return nil
}

func (s *State) applyLateReport(e *ledger.Event, b *events.TaskLateReport) error {
	t, err := s.task(e, b.TaskID)
	if err != nil {
		return err
	}
	if err := holder(t, b.DeviceID, b.Generation, b.ExecutionID, StateRunning, StateWaitingConfirmation); err != nil {
		return err
	}
	lease, err := judgedLease(t, b.LeaseExpiresAt)
	if err != nil {
		return err
	}
	if e.At < lease {
		return violation("task %s late report while its running lease is valid", t.ID)
	}
	foldLease(t, lease, t.Exec.LastSeenAt)
	t.LateReports = append(t.LateReports, LateReport{At: e.At, DeviceID: b.DeviceID, Generation: b.Generation,
		ExecutionID: b.ExecutionID, Outcome: b.Outcome, Result: b.Result, ReasonCode: b.ReasonCode, Detail: b.Detail})
	s.touchStream(t, e)
	r := taskReply(t, e.At)
	s.recordCode(e, t, &r, OutcomeRefused, "lease_expired")
	return nil
}

func (s *State) applyEvidenceAttached(e *ledger.Event, b *events.TaskEvidenceAttached) error {
	t, err := s.task(e, b.TaskID)
	if err != nil {
		return err
	}
	if err := holder(t, b.DeviceID, b.Generation, b.ExecutionID, StateRunning, StateWaitingConfirmation); err != nil {
		return err
	}
	if b.LeaseExpiresAt != 0 { // logs before quiet heartbeats did not record it
		lease, err := judgedLease(t, b.LeaseExpiresAt)
		if err != nil {
			return err
		}
		if e.At >= lease {
			return violation("task %s evidence after its running lease expired", t.ID)
		}
		foldLease(t, lease, e.At)
	}
	ev := Evidence{ID: b.EvidenceID, ExecutionID: b.ExecutionID, SHA256: b.SHA256, Size: b.Size, Kind: b.Kind, CapturedAt: b.CapturedAt}
	t.Evidence = append(t.Evidence, ev)
	s.touchStream(t, e)
	r := taskReply(t, e.At)
	r.Evidence = &ev
	s.record(e, t, &r, OutcomeCreated)
	return nil
}

func (s *State) applyExecStep(e *ledger.Event, b *events.TaskExecStep) error {
	t, err := s.task(e, b.TaskID)
	if err != nil {
		return err
	}
	from, to := StateRunning, StateWaitingConfirmation
	if e.Type == events.EvTaskResumed {
		from, to = StateWaitingConfirmation, StateRunning
	}
	if err := holder(t, b.DeviceID, b.Generation, b.ExecutionID, from); err != nil {
		return err
	}
	lease, err := judgedLease(t, b.LeaseExpiresAt)
	if err != nil {
		return err
	}
	if e.At >= lease {
		return violation("task %s acted on after its running lease expired", t.ID)
	}
	foldLease(t, lease, e.At)
	if err := checkVersion(t, b.Version); err != nil {
		return err
	}
	t.State, t.Version = to, b.Version
	s.touch(t, e)
	r := taskReply(t, e.At)
	s.record(e, t, &r, OutcomeAccepted)
	return nil
}

// endExecution checks and applies the common part of complete, fail and
// cancel-ack: the device ends its own live execution.
func (s *State) endExecution(e *ledger.Event, taskID, device string, g uint64, exec string, version uint64, judged int64) (*Task, error) {
	t, err := s.task(e, taskID)
	if err != nil {
		return nil, err
	}
	if err := holder(t, device, g, exec, StateRunning, StateWaitingConfirmation); err != nil {
		return nil, err
	}
	lease, err := judgedLease(t, judged)
	if err != nil {
		return nil, err
	}
	if e.At >= lease {
		return nil, violation("task %s ended after its running lease expired", t.ID)
	}
	foldLease(t, lease, e.At)
	if err := checkVersion(t, version); err != nil {
		return nil, err
	}
	t.Version = version
	t.Exec.Ended = true
	s.releaseDevice(t)
	return t, nil
}

// judgedLease is the running lease a decision says it was judged against,
// checked against the chain: never shorter than the lease the events set
// (heartbeats that append no event only extend it). 0, in logs written
// before quiet heartbeats, is the lease the events set.
func judgedLease(t *Task, recorded int64) (int64, error) {
	if recorded == 0 {
		return t.Exec.LeaseExpiresAt, nil
	}
	if recorded < t.Exec.LeaseExpiresAt {
		return 0, violation("task %s decision judged against lease %d, shorter than the running lease %d",
			t.ID, recorded, t.Exec.LeaseExpiresAt)
	}
	return recorded, nil
}

// foldLease makes a lease-judged event's lease the one the events set, and
// drops the soft extension it covers, so the live state and a replay (whose
// soft records are loaded after the fold) agree.
func foldLease(t *Task, lease, seenAt int64) {
	t.Exec.LeaseExpiresAt, t.Exec.LastSeenAt = lease, seenAt
	if t.Exec.SoftLeaseExpiresAt <= lease {
		t.Exec.SoftLeaseExpiresAt, t.Exec.SoftSeenAt = 0, 0
	}
}
