package commands

import (
	"crypto/subtle"
	"taskledger/wire"

	"taskledger/events"
	"taskledger/ledger"
	"taskledger/projections"
)

// Task-scoped device operations (the idempotency operation names).
const (
	OpRenew             = "renew"
	OpRelease           = "release"
	OpStart             = "start"
	OpHeartbeat         = "heartbeat"
	OpAwaitConfirmation = "await-confirmation"
	OpResume            = "resume"
	OpComplete          = "complete"
	OpFail              = "fail"
	OpCancelAck         = "cancel-ack"
	OpEvidence          = "evidence"
)

// TaskOps lists every task-scoped device operation.
func TaskOps() []string {
	return []string{OpRenew, OpRelease, OpStart, OpHeartbeat, OpAwaitConfirmation, OpResume,
		OpComplete, OpFail, OpCancelAck, OpEvidence}
}

// allowedIn is the state machine for device operations.
var allowedIn = map[string][]wire.State{
	OpRenew:             {projections.StateClaimed},
	OpRelease:           {projections.StateClaimed},
	OpStart:             {projections.StateClaimed},
	OpHeartbeat:         {projections.StateRunning, projections.StateWaitingConfirmation},
	OpAwaitConfirmation: {projections.StateRunning},
	OpResume:            {projections.StateWaitingConfirmation},
	OpComplete:          {projections.StateRunning, projections.StateWaitingConfirmation},
	OpFail:              {projections.StateRunning, projections.StateWaitingConfirmation},
	OpCancelAck:         {projections.StateRunning, projections.StateWaitingConfirmation},
	OpEvidence:          {projections.StateRunning, projections.StateWaitingConfirmation},
}

// usesExecution: operations whose body names the execution.
var usesExecution = map[string]bool{
	OpHeartbeat: true, OpAwaitConfirmation: true, OpResume: true, OpComplete: true,
	OpFail: true, OpCancelAck: true, OpEvidence: true,
}

// usesVersion: operations whose body carries expected_version.
var usesVersion = map[string]bool{
	OpRelease: true, OpStart: true, OpAwaitConfirmation: true, OpResume: true,
	OpComplete: true, OpFail: true, OpCancelAck: true,
}

// TaskCall is one task-scoped device call.
type TaskCall struct {
	Op          string
	Device      Principal
	TaskID      string
	Key         string
	Fingerprint []byte
	TokenHash   string // SHA-256 (hex) of X-Claim-Token
	Generation  uint64
	ExecutionID string
	Version     uint64 // expected_version
	SessionID   string // renew
	ExpectedAt  int64  // renew: expected_lease_expires_at (ms)
	Step        string // heartbeat
	ClientTime  *int64 // heartbeat
	Reason      string // await-confirmation
	Result      string // complete: canonical JSON object
	ReasonCode  string // fail
	Detail      string // fail
	Evidence    *projections.Evidence
	// RecordedOnly: the call's key had a record when the request came
	// (see Precheck), so its blob was hashed, not stored. It may only
	// replay or be refused: a key that is no longer recorded is
	// idempotency_key_expired, never a new event.
	RecordedOnly bool
}

// replayCheck decides whether a recorded outcome may still be answered:
// commands that end a claim or execution always replay; the others only
// while their claim or execution is current and its lease valid.
func (c *TaskCall) replayCheck(x *Ctx) func(r *projections.IdemRecord) error {
	return func(r *projections.IdemRecord) error {
		if r.Outcome != projections.OutcomeAccepted || r.Reply == nil {
			return nil
		}
		t := x.State.Tasks[r.TaskID]
		switch c.Op {
		case OpRelease, OpComplete, OpFail, OpCancelAck, OpEvidence:
			return nil
		case OpRenew:
			if t == nil || t.State != projections.StateClaimed || t.Claim == nil ||
				t.Claim.Generation != r.Reply.Generation || x.Now >= t.Claim.LeaseExpiresAt {
				return ErrClaimReplayExpired
			}
		default: // start, heartbeat, await-confirmation, resume
			if t == nil || !t.Started() || t.Claim == nil || t.Claim.Generation != r.Reply.Generation ||
				t.Exec == nil || t.Exec.ID != r.Reply.ExecutionID || t.Exec.Ended || x.Now >= t.Exec.Lease() {
				return ErrClaimReplayExpired
			}
		}
		return nil
	}
}

// Decide checks a task-scoped call in api.md's order and emits its event.
func (c *TaskCall) Decide(x *Ctx) (*Decision, error) {
	d, err := activeDevice(x, c.Device)
	if err != nil {
		return nil, err
	}
	actor := c.Device.Actor()
	scope := Scope(actor, c.Op)
	if dec, err := lookupIdem(x, scope, c.Key, c.Fingerprint, c.replayCheck(x)); dec != nil || err != nil {
		return dec, err
	}
	if c.RecordedOnly {
		return nil, ErrIdempotencyKeyExpired
	}
	t := x.State.Tasks[c.TaskID]
	if t == nil || !t.Open() || t.Claim == nil || t.Claim.DeviceID != d.ID {
		return nil, ErrClaimNotFound
	}
	if subtle.ConstantTimeCompare([]byte(t.Claim.TokenHash), []byte(c.TokenHash)) != 1 {
		return nil, ErrClaimTokenMismatch
	}
	if c.Generation != t.Claim.Generation {
		return nil, ErrClaimGenerationMismatch
	}
	id := idem(scope, c.Key, c.Fingerprint)
	stream := events.TaskStream(t.ID)
	draft := func(typ events.Type, body any) *Decision {
		return &Decision{Events: []Draft{{Stream: stream, Type: typ, Actor: actor, Idem: id, Body: body}},
			Answer: recorded(scope, c.Key)}
	}
	leaseEnd := t.Claim.LeaseExpiresAt
	if t.Started() {
		leaseEnd = t.Exec.Lease() // the lease in force, quiet heartbeats included
	}
	if x.Now >= leaseEnd {
		if (c.Op == OpComplete || c.Op == OpFail) && t.Started() && t.Exec.ID == c.ExecutionID {
			return draft(events.EvTaskLateReport, &events.TaskLateReport{TaskID: t.ID, DeviceID: d.ID,
				Generation: t.Claim.Generation, ExecutionID: c.ExecutionID, Outcome: c.Op, Result: c.Result,
				ReasonCode: c.ReasonCode, Detail: c.Detail, LeaseExpiresAt: leaseEnd}), nil
		}
		return nil, ErrLeaseExpired
	}
	if err := c.checkState(t); err != nil {
		return nil, err
	}
	return c.decideOp(x, t, d, scope, leaseEnd, draft)
}

// checkState checks the call against the task within its lease: the state
// the operation is allowed in, then execution, session, version, lease
// expectation and cancel request, in api.md's order.
func (c *TaskCall) checkState(t *projections.Task) error {
	allowed := false
	for _, st := range allowedIn[c.Op] {
		allowed = allowed || t.State == st
	}
	if !allowed {
		return ErrInvalidState
	}
	if usesExecution[c.Op] && (t.Exec == nil || t.Exec.ID != c.ExecutionID) {
		return ErrExecutionMismatch
	}
	if c.Op == OpRenew && c.SessionID != t.Claim.SessionID {
		return ErrSessionMismatch
	}
	if usesVersion[c.Op] && c.Version != t.Version {
		return ErrVersionMismatch
	}
	if c.Op == OpRenew && c.ExpectedAt != t.Claim.LeaseExpiresAt {
		return ErrLeaseExpectationMismatch
	}
	if c.Op == OpCancelAck && !t.CancelRequested {
		return ErrCancelNotRequested
	}
	return nil
}

// decideOp emits the operation's event (or the quiet heartbeat's soft
// records) once every check passed; leaseEnd is the lease in force.
func (c *TaskCall) decideOp(x *Ctx, t *projections.Task, d *projections.Device, scope string, leaseEnd int64,
	draft func(events.Type, any) *Decision) (*Decision, error) {
	g, ex, v := t.Claim.Generation, c.ExecutionID, t.Version+1
	switch c.Op {
	case OpRenew:
		return draft(events.EvTaskClaimRenewed, &events.TaskClaimRenewed{TaskID: t.ID, DeviceID: d.ID,
			Generation: g, PreviousExpiresAt: t.Claim.LeaseExpiresAt,
			LeaseExpiresAt: min(x.Now+x.Cfg.ClaimLease.Milliseconds(), t.Claim.AuthorizationExpiresAt)}), nil
	case OpRelease:
		return draft(events.EvTaskReleased, &events.TaskReleased{TaskID: t.ID, DeviceID: d.ID, Generation: g, Version: v}), nil
	case OpStart:
		if t.Auth == nil || t.Auth.ID != t.Claim.AuthorizationID || t.Auth.Status != projections.AuthActive || !t.Eligible(x.Now) {
			// The authorization the claim relied on was consumed, revoked or
			// outlived: the claim cannot start (one authorization, one execution).
			return nil, ErrInvalidState
		}
		return draft(events.EvTaskStarted, &events.TaskStarted{TaskID: t.ID, DeviceID: d.ID, Generation: g,
			ExecutionID: x.newID(), AuthorizationID: t.Auth.ID,
			LeaseExpiresAt: x.Now + x.Cfg.RunningLease.Milliseconds(), Version: v}), nil
	case OpHeartbeat:
		lease := x.Now + x.Cfg.RunningLease.Milliseconds()
		if c.Step == t.Exec.Step {
			return c.quietHeartbeat(x, t, scope, lease)
		}
		return dropSoftLease(draft(events.EvTaskHeartbeat, &events.TaskHeartbeat{TaskID: t.ID, DeviceID: d.ID,
			Generation: g, ExecutionID: ex, PreviousExpiresAt: leaseEnd, LeaseExpiresAt: lease,
			Step: c.Step, ClientTime: c.ClientTime}), ex), nil
	case OpAwaitConfirmation:
		return draft(events.EvTaskAwaitingConfirmation, &events.TaskExecStep{TaskID: t.ID, DeviceID: d.ID,
			Generation: g, ExecutionID: ex, Version: v, Reason: c.Reason, LeaseExpiresAt: leaseEnd}), nil
	case OpResume:
		return draft(events.EvTaskResumed, &events.TaskExecStep{TaskID: t.ID, DeviceID: d.ID,
			Generation: g, ExecutionID: ex, Version: v, LeaseExpiresAt: leaseEnd}), nil
	case OpComplete:
		return dropSoftLease(draft(events.EvTaskCompleted, &events.TaskCompleted{TaskID: t.ID, DeviceID: d.ID,
			Generation: g, ExecutionID: ex, Version: v, Result: c.Result, LeaseExpiresAt: leaseEnd}), ex), nil
	case OpFail:
		return dropSoftLease(draft(events.EvTaskFailed, &events.TaskFailed{TaskID: t.ID, DeviceID: d.ID,
			Generation: g, ExecutionID: ex, Version: v, ReasonCode: c.ReasonCode, Detail: c.Detail,
			LeaseExpiresAt: leaseEnd}), ex), nil
	case OpCancelAck:
		return dropSoftLease(draft(events.EvTaskCanceled, &events.TaskCanceled{TaskID: t.ID,
			By: projections.ActorDeviceCancel, Reason: t.CancelReason, DeviceID: d.ID, Generation: g, ExecutionID: ex,
			Version: v, LeaseExpiresAt: leaseEnd}), ex), nil
	case OpEvidence:
		ev := c.Evidence
		return draft(events.EvTaskEvidenceAttached, &events.TaskEvidenceAttached{TaskID: t.ID, DeviceID: d.ID,
			Generation: g, ExecutionID: ex, EvidenceID: x.newID(), SHA256: ev.SHA256, Size: ev.Size, Kind: ev.Kind,
			CapturedAt: ev.CapturedAt, LeaseExpiresAt: leaseEnd}), nil
	}
	return nil, ErrInternal
}

// quietHeartbeat extends the running lease of a heartbeat that leaves the
// step unchanged without appending an event: the lease and the answer are
// soft records written in the batch's transaction (so fsynced before the
// answer, like every event), one lease record per execution, overwritten.
func (c *TaskCall) quietHeartbeat(x *Ctx, t *projections.Task, scope string, lease int64) (*Decision, error) {
	soft := &projections.SoftLease{TaskID: t.ID, ExecutionID: t.Exec.ID, Generation: t.Claim.Generation,
		LeaseExpiresAt: lease, SeenAt: x.Now}
	rec := &projections.IdemRecord{Scope: scope, Key: c.Key, Fingerprint: c.Fingerprint, At: x.Now,
		Outcome: projections.OutcomeAccepted, TaskID: t.ID, DeviceID: c.Device.DeviceID,
		Reply: &projections.Reply{TaskID: t.ID, State: string(t.State), Version: t.Version, Generation: t.Generation,
			ExecutionID: t.Exec.ID, ServerTime: x.Now, LeaseExpiresAt: lease, CancelRequested: t.CancelRequested,
			Step: c.Step}}
	rawLease := soft.Encode()
	rawRec, err := projections.EncodeSoftIdem(rec)
	if err != nil {
		return nil, err
	}
	return &Decision{
		Soft: append([]ledger.SoftRecord{{Key: projections.SoftLeaseKey(t.Exec.ID), Value: rawLease}},
			softIdemWrites(x.State, rec, rawRec)...),
		Effect: func(s *projections.State) {
			s.ApplySoftLease(soft)
			s.Idem.PutSoft(rec, rawRec)
		},
		Answer: func(*projections.State) Result { return Result{Record: rec} },
	}, nil
}

// dropSoftLease deletes an execution's soft lease record with a decision
// whose event records the lease (compaction: the chain now holds it).
func dropSoftLease(d *Decision, executionID string) *Decision {
	d.Soft = append(d.Soft, ledger.SoftRecord{Key: projections.SoftLeaseKey(executionID)})
	return d
}
