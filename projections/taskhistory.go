package projections

import (
	"fmt"
	"taskledger/wire"

	"taskledger/events"
	"taskledger/ledger"
)

// CheckTaskHistory checks one task's own events, in stream order, against
// the rules that need nothing outside the task's stream: the state machine
// (each event allowed in the state the earlier ones left, nothing after a
// terminal state), versions that step by exactly one with each change of
// state and never otherwise, revisions that step by one, one execution per
// authorization, and no decision on an expired lease — a claim started
// before its claim lease ended, every lease-dependent device decision taken
// before the running lease it records, a late report or a recovery of a
// live device only at or after it. It is what an auditor can check from an
// audit bundle alone (the full fold, CheckTaskHistory included, runs in
// verify over the whole log).
func CheckTaskHistory(evs []ledger.Event) error {
	r := NewTaskRules()
	for i := range evs {
		if !isTaskStream(evs[i].Stream) {
			return fmt.Errorf("seq %d: stream %s is not a task's", evs[i].Seq, evs[i].Stream)
		}
		if err := r.Check(&evs[i]); err != nil {
			return err
		}
	}
	return nil
}

// TaskRules checks the task rules of CheckTaskHistory over a whole log, one
// event at a time (verify runs it beside the fold).
type TaskRules struct{ tasks map[string]*taskHistory }

// NewTaskRules returns a checker with no task seen.
func NewTaskRules() *TaskRules { return &TaskRules{tasks: map[string]*taskHistory{}} }

func isTaskStream(s string) bool {
	return len(s) > len(taskPrefix) && s[:len(taskPrefix)] == taskPrefix
}

// Check checks e against its task's history so far; events of other
// streams are not a task's and pass.
func (r *TaskRules) Check(e *ledger.Event) error {
	if !isTaskStream(e.Stream) {
		return nil
	}
	body, err := events.DecodeBody(e.Type, e.Schema, e.Body)
	if err != nil {
		return fmt.Errorf("seq %d: %w", e.Seq, err)
	}
	id := e.Stream[len(taskPrefix):]
	h := r.tasks[id]
	if h == nil {
		h = &taskHistory{}
		r.tasks[id] = h
	}
	if err := h.step(e, body); err != nil {
		return fmt.Errorf("seq %d %s: %w", e.Seq, e.Type, err)
	}
	return nil
}

// taskHistory is the little state a task's own rules need.
type taskHistory struct {
	state         wire.State
	version       uint64
	revision      uint64
	auth          string // the ACTIVE authorization's id ("" when none)
	authMatches   bool   // it was given for the current revision
	authExpires   int64
	executed      map[string]bool // authorizations that started an execution
	claimLease    int64           // the open claim's lease
	runningLease  int64           // the current execution's lease (as the events set it)
	cancelPending bool
}

func (h *taskHistory) need(states ...wire.State) error {
	for _, s := range states {
		if h.state == s {
			return nil
		}
	}
	if h.state == "" {
		return fmt.Errorf("the task's history does not start with task.created")
	}
	return fmt.Errorf("not allowed in %s", h.state)
}

// move checks a change of state and its version (v = the event's version).
func (h *taskHistory) move(to wire.State, v uint64) error {
	if v != h.version+1 {
		return fmt.Errorf("version %d after %d: a change of state steps the version by one", v, h.version)
	}
	h.state, h.version = to, v
	return nil
}

// same checks an event that keeps the state: its version, if it carries
// one, is the current one.
func (h *taskHistory) same(v uint64) error {
	if v != h.version {
		return fmt.Errorf("version %d, the task is at %d and this event changes no state", v, h.version)
	}
	return nil
}

// judged is the running lease a decision records, never shorter than the
// one the events set (0: a log before recorded leases).
func (h *taskHistory) judged(recorded int64) (int64, error) {
	if recorded == 0 {
		return h.runningLease, nil
	}
	if recorded < h.runningLease {
		return 0, fmt.Errorf("judged against lease %d, shorter than the running lease %d", recorded, h.runningLease)
	}
	h.runningLease = recorded
	return recorded, nil
}

// live checks a device decision that needs a live running lease.
func (h *taskHistory) live(e *ledger.Event, recorded int64) error {
	lease, err := h.judged(recorded)
	if err != nil {
		return err
	}
	if e.At >= lease {
		return fmt.Errorf("decided at %d, on a running lease that ended at %d", e.At, lease)
	}
	return nil
}

// closeClaim is an operator command on PENDING, or on CLAIMED whose stale
// claim it closes (back to PENDING).
func (h *taskHistory) closeClaim(e *ledger.Event, closed *events.ClosedClaim, v uint64) error {
	if closed == nil {
		if err := h.need(StatePending); err != nil {
			return err
		}
		return h.same(v)
	}
	if err := h.need(StateClaimed); err != nil {
		return err
	}
	if e.At < h.claimLease {
		return fmt.Errorf("closes a claim whose lease ends at %d", h.claimLease)
	}
	return h.move(StatePending, v)
}

func (h *taskHistory) revise(r uint64) error {
	if r != h.revision+1 {
		return fmt.Errorf("revision %d after %d", r, h.revision)
	}
	h.revision = r
	return nil
}

func (h *taskHistory) step(e *ledger.Event, body any) error {
	if h.state == StateSucceeded || h.state == StateFailed || h.state == StateCanceled {
		return fmt.Errorf("an event after the task ended %s", h.state)
	}
	switch body.(type) {
	case *events.TaskCreated, *events.TaskAmended, *events.TaskReferenceImageSet, *events.TaskAuthorized, *events.TaskAuthorizationRevoked:
		return h.stepDefinition(e, body)
	case *events.TaskClaimed, *events.TaskClaimResumed, *events.TaskClaimRenewed, *events.TaskReleased, *events.TaskStarted:
		return h.stepClaim(e, body)
	case *events.TaskHeartbeat, *events.TaskExecStep, *events.TaskCompleted, *events.TaskFailed, *events.TaskLateReport, *events.TaskCancelRequested, *events.TaskCanceled, *events.TaskRecovered, *events.TaskEvidenceAttached:
		return h.stepExecution(e, body)
	}
	return fmt.Errorf("not an event of a task stream")
}

// stepDefinition checks an event of the task's own definition: created, amended, reference image, authorized, authorization revoked.
func (h *taskHistory) stepDefinition(e *ledger.Event, body any) error {
	switch b := body.(type) {
	case *events.TaskCreated:
		if h.state != "" {
			return fmt.Errorf("a second task.created")
		}
		h.state, h.version, h.revision, h.executed = StatePending, 1, 1, map[string]bool{}
		if b.Authorization != nil {
			h.auth, h.authMatches, h.authExpires = b.Authorization.ID, true, b.Authorization.ExpiresAt
		}
	case *events.TaskAmended:
		if err := h.closeClaim(e, b.Closed, b.Version); err != nil {
			return err
		}
		h.authMatches = false // an amendment invalidates the authorization
		return h.revise(b.Revision)
	case *events.TaskReferenceImageSet:
		if err := h.closeClaim(e, b.Closed, b.Version); err != nil {
			return err
		}
		h.authMatches = false
		return h.revise(b.Revision)
	case *events.TaskAuthorized:
		if err := h.closeClaim(e, b.Closed, b.Version); err != nil {
			return err
		}
		if b.Authorization.Revision != h.revision {
			return fmt.Errorf("authorizes revision %d, the task is at %d", b.Authorization.Revision, h.revision)
		}
		h.auth, h.authMatches, h.authExpires = b.Authorization.ID, true, b.Authorization.ExpiresAt
	case *events.TaskAuthorizationRevoked:
		if err := h.closeClaim(e, b.Closed, b.Version); err != nil {
			return err
		}
		if b.AuthorizationID != h.auth {
			return fmt.Errorf("revokes authorization %s, the current one is %s", b.AuthorizationID, h.auth)
		}
		h.auth = ""
	}
	return nil
}

// stepClaim checks an event of the claim: claimed, resumed, renewed, released, and the start that turns it into an execution.
func (h *taskHistory) stepClaim(e *ledger.Event, body any) error {
	switch b := body.(type) {
	case *events.TaskClaimed:
		if err := h.need(StatePending, StateClaimed); err != nil {
			return err
		}
		if h.state == StateClaimed && e.At < h.claimLease {
			return fmt.Errorf("claimed while the previous claim's lease ran until %d", h.claimLease)
		}
		if b.AuthorizationID != h.auth || h.auth == "" || !h.authMatches || e.At >= h.authExpires {
			return fmt.Errorf("claimed under authorization %s, which is not the task's active, matching, unexpired one", b.AuthorizationID)
		}
		h.claimLease = b.LeaseExpiresAt
		return h.move(StateClaimed, b.Version)
	case *events.TaskClaimResumed:
		return h.need(StateClaimed)
	case *events.TaskClaimRenewed:
		if err := h.need(StateClaimed); err != nil {
			return err
		}
		if e.At >= h.claimLease || b.PreviousExpiresAt != h.claimLease {
			return fmt.Errorf("renews lease %d at %d, the claim lease is %d", b.PreviousExpiresAt, e.At, h.claimLease)
		}
		h.claimLease = b.LeaseExpiresAt
	case *events.TaskReleased:
		if err := h.need(StateClaimed); err != nil {
			return err
		}
		return h.move(StatePending, b.Version)
	case *events.TaskStarted:
		if err := h.need(StateClaimed); err != nil {
			return err
		}
		if e.At >= h.claimLease {
			return fmt.Errorf("started at %d, after the claim lease ended at %d", e.At, h.claimLease)
		}
		if h.executed[b.AuthorizationID] {
			return fmt.Errorf("a second execution under authorization %s (one execution per authorization)", b.AuthorizationID)
		}
		if b.AuthorizationID != h.auth || !h.authMatches {
			return fmt.Errorf("started under authorization %s, which is not the task's active one", b.AuthorizationID)
		}
		h.executed[b.AuthorizationID] = true
		h.auth = "" // consumed
		h.runningLease, h.cancelPending = b.LeaseExpiresAt, false
		return h.move(StateRunning, b.Version)
	}
	return nil
}

// stepExecution checks an event of the execution and the task's end: heartbeat, pause/resume, complete, fail, late report, cancel, recover, evidence.
func (h *taskHistory) stepExecution(e *ledger.Event, body any) error {
	switch b := body.(type) {
	case *events.TaskHeartbeat:
		if err := h.need(StateRunning, StateWaitingConfirmation); err != nil {
			return err
		}
		if err := h.live(e, b.PreviousExpiresAt); err != nil {
			return err
		}
		h.runningLease = b.LeaseExpiresAt
	case *events.TaskExecStep:
		from, to := StateRunning, StateWaitingConfirmation
		if e.Type == events.EvTaskResumed {
			from, to = StateWaitingConfirmation, StateRunning
		}
		if err := h.need(from); err != nil {
			return err
		}
		if err := h.live(e, b.LeaseExpiresAt); err != nil {
			return err
		}
		return h.move(to, b.Version)
	case *events.TaskCompleted:
		return h.end(e, b.LeaseExpiresAt, StateSucceeded, b.Version)
	case *events.TaskFailed:
		return h.end(e, b.LeaseExpiresAt, StateFailed, b.Version)
	case *events.TaskLateReport:
		if err := h.need(StateRunning, StateWaitingConfirmation); err != nil {
			return err
		}
		lease, err := h.judged(b.LeaseExpiresAt)
		if err != nil {
			return err
		}
		if e.At < lease {
			return fmt.Errorf("a late report at %d while the running lease ran until %d", e.At, lease)
		}
	case *events.TaskCancelRequested:
		if err := h.need(StateRunning, StateWaitingConfirmation); err != nil {
			return err
		}
		h.cancelPending = true
	case *events.TaskCanceled:
		if b.By == ActorDeviceCancel {
			if !h.cancelPending {
				return fmt.Errorf("a cancel-ack without a cancel request")
			}
			return h.end(e, b.LeaseExpiresAt, StateCanceled, b.Version)
		}
		if err := h.need(StatePending, StateClaimed); err != nil {
			return err
		}
		return h.move(StateCanceled, b.Version)
	case *events.TaskRecovered:
		return h.recovered(b)
	case *events.TaskEvidenceAttached:
		if err := h.need(StateRunning, StateWaitingConfirmation); err != nil {
			return err
		}
		if b.LeaseExpiresAt != 0 {
			return h.live(e, b.LeaseExpiresAt)
		}
	}
	return nil
}

// recovered checks an operator's recovery: of a claimed or executing
// task, never judged against a shorter lease than the chain's.
func (h *taskHistory) recovered(b *events.TaskRecovered) error {
	if err := h.need(StateClaimed, StateRunning, StateWaitingConfirmation); err != nil {
		return err
	}
	if b.ExecutionID != "" {
		// A recovery before the lease ended needs a revoked device,
		// which only the device's stream shows; the lease recorded
		// must still not be shorter than the chain's.
		if _, err := h.judged(b.LeaseExpiresAt); err != nil {
			return err
		}
	}
	to := StatePending
	if b.Decision == events.RecoverFail {
		to = StateFailed
	} else {
		h.auth = "" // a requeued task needs a new authorization
	}
	return h.move(to, b.Version)
}

// end is a device's complete, fail or cancel-ack of its live execution.
func (h *taskHistory) end(e *ledger.Event, recorded int64, to wire.State, v uint64) error {
	if err := h.need(StateRunning, StateWaitingConfirmation); err != nil {
		return err
	}
	if err := h.live(e, recorded); err != nil {
		return err
	}
	return h.move(to, v)
}
