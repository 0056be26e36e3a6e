package projections

import (
	"taskledger/events"
	"taskledger/ledger"
)

// The fold of the operator side of a task: creation, amendments, cancellation and recovery.

func (s *State) applyCreated(e *ledger.Event, b *events.TaskCreated) error {
	if _, dup := s.Tasks[b.TaskID]; dup {
		return violation("task %s exists", b.TaskID)
	}
	if !isStream(e.Stream, taskPrefix, b.TaskID) || e.StreamVersion != 1 {
		return violation("task.created on stream %s/%d", e.Stream, e.StreamVersion)
	}
	t := &Task{ID: b.TaskID, CreateSeq: e.Seq, CreatedAt: e.At, State: StatePending,
		Version: 1, Revision: 1, Payload: b.Payload, PayloadSHA256: b.PayloadSHA256}
	if b.Authorization != nil {
		t.Auth = &Authorization{AuthBody: *b.Authorization, Status: AuthActive, CreatedAt: e.At, Takeover: b.Takeover}
	}
	s.Tasks[t.ID] = t
	t.pos = len(s.taskOrder)
	s.taskOrder = append(s.taskOrder, t)
	s.touch(t, e)
	s.record(e, t, nil, OutcomeCreated)
	return nil
}

func (s *State) applyAmended(e *ledger.Event, b *events.TaskAmended) error {
	return s.amendment(e, b.TaskID, b.Revision, b.Closed, b.Version, func(t *Task) {
		t.Payload, t.PayloadSHA256 = b.Payload, b.PayloadSHA256
	})
}

func (s *State) applyReferenceImageSet(e *ledger.Event, b *events.TaskReferenceImageSet) error {
	return s.amendment(e, b.TaskID, b.Revision, b.Closed, b.Version, func(t *Task) {
		t.Image = &Blob{SHA256: b.SHA256, Size: b.Size}
	})
}

func (s *State) applyCancelRequested(e *ledger.Event, b *events.TaskCancelRequested) error {
	t, err := s.task(e, b.TaskID)
	if err != nil {
		return err
	}
	if !t.Started() {
		return violation("task %s cannot take a cancel request in %s", t.ID, t.State)
	}
	t.CancelRequested, t.CancelReason = true, b.Reason
	s.touch(t, e)
	s.record(e, t, nil, OutcomeAccepted)
	return nil
}

func (s *State) applyCanceled(e *ledger.Event, b *events.TaskCanceled) error {
	t, err := s.task(e, b.TaskID)
	if err != nil {
		return err
	}
	if b.By == ActorDeviceCancel {
		if !t.CancelRequested {
			return violation("task %s cancel-ack without a cancel request", t.ID)
		}
		if _, err := s.endExecution(e, b.TaskID, b.DeviceID, b.Generation, b.ExecutionID, b.Version, b.LeaseExpiresAt); err != nil {
			return err
		}
	} else {
		if t.State != StatePending && t.State != StateClaimed {
			return violation("task %s cannot be canceled at once in %s", t.ID, t.State)
		}
		if err := checkVersion(t, b.Version); err != nil {
			return err
		}
		s.releaseDevice(t)
		t.Version, t.Claim = b.Version, nil
		t.CancelReason = b.Reason
	}
	t.State = StateCanceled
	s.finish(t, e)
	return nil
}

func (s *State) applyRecovered(e *ledger.Event, b *events.TaskRecovered) error {
	t, err := s.task(e, b.TaskID)
	if err != nil {
		return err
	}
	if !t.Open() || t.Claim == nil || t.Claim.DeviceID != b.DeviceID || t.Claim.Generation != b.Generation {
		return violation("task %s cannot be recovered in %s", t.ID, t.State)
	}
	d := s.Devices[b.DeviceID]
	revoked := d != nil && d.Status == DeviceStatusRevoked
	switch {
	case t.Started():
		if t.Exec == nil || t.Exec.ID != b.ExecutionID {
			return violation("task %s recovered while its execution is live", t.ID)
		}
		lease, err := judgedLease(t, b.LeaseExpiresAt)
		if err != nil {
			return err
		}
		if e.At < lease && !revoked {
			return violation("task %s recovered while its execution is live", t.ID)
		}
		foldLease(t, lease, t.Exec.LastSeenAt)
	case !revoked && !recoverableClaim(t, e.At):
		return violation("task %s recovered while CLAIMED by an active device", t.ID)
	}
	if err := checkVersion(t, b.Version); err != nil {
		return err
	}
	s.releaseDevice(t)
	if t.Exec != nil && t.Started() {
		t.Exec.Ended = true
	}
	t.Version, t.Claim = b.Version, nil
	t.Recovery = &Recovery{Decision: b.Decision, Reason: b.Reason, At: e.At}
	if b.Decision == events.RecoverFail {
		t.State = StateFailed
		t.Failure = &Failure{ReasonCode: "recovered", Detail: b.Reason}
	} else {
		t.State = StatePending
		if t.Auth != nil && t.Auth.Status == AuthActive {
			t.Auth.Status = AuthRevoked // a requeued task needs a new authorization
		}
	}
	s.touch(t, e)
	s.record(e, t, nil, OutcomeAccepted)
	return nil
}
