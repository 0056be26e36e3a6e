package device

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"

	"taskledger/client"
	"taskledger/client/localstate"
	"taskledger/internal/failpoint"
)

// Start moves the active claim to RUNNING (or replays a pending start).
func (d *Device) Start(ctx context.Context) (client.TaskResult, error) {
	return d.taskOp(ctx, client.OpStart, func(a *localstate.Active) ([]byte, string) {
		return d.c.StartBody(a.Generation, a.Version), ""
	})
}

// Heartbeat renews the running lease with step.
func (d *Device) Heartbeat(ctx context.Context, step string) (client.TaskResult, error) {
	return d.taskOp(ctx, client.OpHeartbeat, func(a *localstate.Active) ([]byte, string) {
		return d.c.HeartbeatBody(a.Generation, a.ExecutionID, step, d.clock.Now()), step
	})
}

// Complete ends the execution as SUCCEEDED with result (a JSON object).
func (d *Device) Complete(ctx context.Context, result json.RawMessage) (client.TaskResult, error) {
	return d.taskOp(ctx, client.OpComplete, func(a *localstate.Active) ([]byte, string) {
		return d.c.CompleteBody(a.Generation, a.ExecutionID, a.Version, result), ""
	})
}

// Fail ends the execution as FAILED.
func (d *Device) Fail(ctx context.Context, reasonCode, detail string) (client.TaskResult, error) {
	return d.taskOp(ctx, client.OpFail, func(a *localstate.Active) ([]byte, string) {
		return d.c.FailBody(a.Generation, a.ExecutionID, a.Version, reasonCode, detail), ""
	})
}

// CancelAck confirms that the work stopped after a cancel request.
func (d *Device) CancelAck(ctx context.Context) (client.TaskResult, error) {
	return d.taskOp(ctx, client.OpCancelAck, func(a *localstate.Active) ([]byte, string) {
		return d.c.CancelAckBody(a.Generation, a.ExecutionID, a.Version), ""
	})
}

// Renew extends the claim lease of an unstarted claim.
func (d *Device) Renew(ctx context.Context) (client.TaskResult, error) {
	return d.taskOp(ctx, client.OpRenew, func(a *localstate.Active) ([]byte, string) {
		return d.c.RenewBody(a.Generation, a.SessionID, a.LeaseExpiresAt), ""
	})
}

// Release gives an unstarted claim back.
func (d *Device) Release(ctx context.Context) (client.TaskResult, error) {
	return d.taskOp(ctx, client.OpRelease, func(a *localstate.Active) ([]byte, string) {
		return d.c.ReleaseBody(a.Generation, a.Version), ""
	})
}

// AwaitConfirmation moves RUNNING to WAITING_CONFIRMATION.
func (d *Device) AwaitConfirmation(ctx context.Context, reason string) (client.TaskResult, error) {
	return d.taskOp(ctx, client.OpAwaitConfirmation, func(a *localstate.Active) ([]byte, string) {
		return d.c.AwaitConfirmationBody(a.Generation, a.ExecutionID, a.Version, reason), ""
	})
}

// Resume moves WAITING_CONFIRMATION back to RUNNING.
func (d *Device) Resume(ctx context.Context) (client.TaskResult, error) {
	return d.taskOp(ctx, client.OpResume, func(a *localstate.Active) ([]byte, string) {
		return d.c.ResumeBody(a.Generation, a.ExecutionID, a.Version), ""
	})
}

// ReplayPending replays the pending task-scoped call or evidence upload, if
// any, to a definitive answer (one request). A pending claim is left to
// Claim.
func (d *Device) ReplayPending(ctx context.Context) error {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.replayPendingLocked(ctx)
}

func (d *Device) replayPendingLocked(ctx context.Context) error {
	p := d.st.Pending
	switch {
	case p == nil || p.Kind == localstate.PendingClaim:
		return nil
	case p.Kind == localstate.PendingEvidence:
		_, err := d.sendEvidence(ctx, p)
		return err
	}
	_, err := d.sendTask(ctx, p)
	return err
}

// MarkLaunched commits that the work of the active (RUNNING) claim is
// about to start; after a crash such a task is never run again.
func (d *Device) MarkLaunched() error {
	d.mu.Lock()
	defer d.mu.Unlock()
	a := d.st.Active
	if a == nil || a.ExecutionID == "" {
		return ErrNoActiveClaim
	}
	cp := *a
	cp.Launched = true
	return d.apply(localstate.Change{Active: &cp})
}

// RecordWork commits the pid and start time of the work command of the
// launched claim; the caller lets the command run only after it returned.
func (d *Device) RecordWork(pid int, startTime uint64) error {
	d.mu.Lock()
	defer d.mu.Unlock()
	a := d.st.Active
	if a == nil || !a.Launched {
		return ErrNoActiveClaim
	}
	cp := *a
	cp.WorkPID, cp.WorkStartTime = pid, startTime
	return d.apply(localstate.Change{Active: &cp})
}

// MarkNeedsPerson records the active task for a person and drops it
// locally (the claim token is discarded with it).
func (d *Device) MarkNeedsPerson(code, reason string) error {
	d.mu.Lock()
	defer d.mu.Unlock()
	a := d.st.Active
	if a == nil {
		return ErrNoActiveClaim
	}
	m := &localstate.Manual{ID: a.TaskID, TaskID: a.TaskID, Generation: a.Generation, ExecutionID: a.ExecutionID,
		Code: code, Reason: reason, Since: d.clock.Now().UTC()}
	if err := d.apply(localstate.Change{ClearActive: true, Manual: m}); err != nil {
		return err
	}
	d.claimToken = ""
	d.log.Error("task needs a person", "task", a.TaskID, "reason", reason)
	return &NeedsPersonError{ID: m.ID, Code: code, Reason: reason}
}

// taskOp runs op on the active claim: a pending call of another op is
// replayed first; a pending call of the same op is replayed instead of
// building a new one.
func (d *Device) taskOp(ctx context.Context, op client.Op, build func(*localstate.Active) ([]byte, string)) (client.TaskResult, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if p := d.st.Pending; p != nil && !(p.Kind == localstate.PendingTask && client.Op(p.Op) == op) {
		if p.Kind == localstate.PendingClaim {
			return client.TaskResult{}, fmt.Errorf("%w: claim", ErrPendingOther)
		}
		if err := d.replayPendingLocked(ctx); err != nil {
			return client.TaskResult{}, err
		}
	}
	p := d.st.Pending
	if p == nil {
		a := d.st.Active
		if a == nil {
			return client.TaskResult{}, ErrNoActiveClaim
		}
		body, step := build(a)
		p = &localstate.Pending{Kind: localstate.PendingTask, Op: string(op), Key: newKey(), TaskID: a.TaskID,
			Generation: a.Generation, ExecutionID: a.ExecutionID, Step: step, Body: body, CreatedAt: d.clock.Now().UTC()}
		if err := d.apply(localstate.Change{Pending: p}); err != nil {
			return client.TaskResult{}, err
		}
		p = d.st.Pending
	} else {
		d.log.Info("replaying", "op", p.Op, "task", p.TaskID, "key", p.Key)
	}
	return d.sendTask(ctx, p)
}

// sendTask sends the persisted call p and stores the definitive outcome.
func (d *Device) sendTask(ctx context.Context, p *localstate.Pending) (client.TaskResult, error) {
	a := d.st.Active
	if a == nil || a.TaskID != p.TaskID || d.claimToken == "" {
		// The claim was dropped: the pending call cannot be sent any more.
		if err := d.apply(localstate.Change{ClearPending: true}); err != nil {
			return client.TaskResult{}, err
		}
		return client.TaskResult{}, ErrNoActiveClaim
	}
	res, err := d.c.Task(ctx, client.TaskCall{Op: client.Op(p.Op), TaskID: p.TaskID, Key: p.Key, ClaimToken: d.claimToken,
		Generation: p.Generation, ExecutionID: p.ExecutionID, Step: p.Step, Body: p.Body})
	if err != nil {
		return client.TaskResult{}, d.taskFailed(p, err)
	}
	if client.Op(p.Op) == client.OpStart {
		_ = failpoint.Eval(failpoint.StartAfterResponse) // kill only
	}
	ch := localstate.Change{ClearPending: true}
	switch res.State {
	case client.StateSucceeded, client.StateFailed, client.StateCanceled, client.StatePending:
		ch.ClearActive = true
	default:
		cp := *a
		cp.State, cp.Version, cp.ServerTime = res.State, res.Version, res.ServerTime
		cp.LeaseExpiresAt, cp.CancelRequested = res.LeaseExpiresAt, res.CancelRequested
		if res.ExecutionID != "" {
			cp.ExecutionID = res.ExecutionID
		}
		ch.Active = &cp
	}
	if err := d.apply(ch); err != nil {
		return client.TaskResult{}, err
	}
	if ch.ClearActive {
		d.claimToken = ""
	}
	d.log.Info("task call done", "op", p.Op, "task", p.TaskID, "state", res.State, "replayed", res.Replayed)
	return res, nil
}

// taskFailed applies the recovery table to a failed task-scoped call.
func (d *Device) taskFailed(p *localstate.Pending, err error) error {
	var ae *client.APIError
	if !errors.As(err, &ae) {
		// Unknown outcome, 401, or a local error: the key stays for replay.
		d.log.Warn("outcome unknown, key kept for replay", "op", p.Op, "task", p.TaskID, "key", p.Key, "err", err.Error())
		return err
	}
	a := d.st.Active
	if a.State == client.StateClaimed && !a.Launched && a.ExecutionID == "" && a.Takeover != "manual" &&
		(ae.Code == client.CodeClaimNotFound || ae.Code == client.CodeLeaseExpired || ae.Code == client.CodeClaimReplayExpired) {
		if aerr := d.apply(localstate.Change{ClearPending: true, ClearActive: true}); aerr != nil {
			return aerr
		}
		d.claimToken = ""
		d.log.Warn("claim lost before start; nothing ran", "task", a.TaskID, "code", ae.Code)
		return fmt.Errorf("%w: task %s: %s", ErrClaimLost, a.TaskID, ae.Code)
	}
	m := &localstate.Manual{ID: a.TaskID, TaskID: a.TaskID, Generation: a.Generation, ExecutionID: a.ExecutionID,
		Code: ae.Code, Since: d.clock.Now().UTC(),
		Reason: fmt.Sprintf("%s answered %d %s: %s", p.Op, ae.Status, ae.Code, ae.Message)}
	if aerr := d.apply(localstate.Change{ClearPending: true, ClearActive: true, Manual: m}); aerr != nil {
		return aerr
	}
	d.claimToken = ""
	d.log.Error("task needs a person", "task", a.TaskID, "code", ae.Code)
	return &NeedsPersonError{ID: m.ID, Code: m.Code, Reason: m.Reason}
}

// Resolve removes the entry id (task id or claim key) that needed a person,
// together with any local claim or pending call for that task; an active
// task that was launched and never reported (it needs a person after a
// crash) can be resolved the same way. It sends nothing; run it after an
// operator dealt with the task on the server.
func Resolve(dir, id string) error {
	store, st, err := OpenStore(dir)
	if err != nil {
		return err
	}
	defer store.Close()
	var ch localstate.Change
	for _, m := range st.Manual {
		if m.ID == id {
			ch.Resolve = id
		}
	}
	if a := st.Active; a != nil && a.TaskID == id {
		if ch.Resolve == "" && !(a.Launched && a.State != client.StateClaimed) {
			return fmt.Errorf("%w: task %s is held and does not need a person", localstate.ErrNotFound, id)
		}
		ch.ClearActive = true
	}
	if ch.Resolve == "" && !ch.ClearActive {
		return fmt.Errorf("%w: nothing needs a person under %s", localstate.ErrNotFound, id)
	}
	if p := st.Pending; p != nil && (p.TaskID == id || p.Key == id) {
		ch.ClearPending = true
	}
	return store.Apply(ch)
}
