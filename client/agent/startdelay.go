package agent

import (
	"bytes"
	"context"
	"errors"
	"os/exec"
	"strings"
	"time"

	"taskledger/client"
	"taskledger/client/device"
	"taskledger/client/localstate"
)

// waitBeforeStart holds a fresh claim for --start-delay before starting
// it, renewing the claim lease every --renew-every meanwhile. Each renew
// is persisted before it is sent (client/device) and replayed with the
// same key after a lost answer, as the claim is. It returns false when the
// claim is gone (lost, or the agent is leaving) and must not be started.
func (r *runner) waitBeforeStart(ctx context.Context, a *localstate.Active) (bool, error) {
	taskID := a.TaskID
	if r.startDelay <= 0 && r.startWhen == nil {
		return true, nil
	}
	if r.startAt == nil || r.startAt.task != taskID {
		now := r.clock.Now()
		r.startAt = &startPlan{task: taskID, at: now.Add(r.startDelay), renewed: now}
		r.log.Info("waiting before start", "task", taskID, "delay", r.startDelay.String(), "start_when", strings.Join(r.startWhen, " "))
	}
	for {
		now := r.clock.Now()
		if !now.Before(r.startAt.at) {
			if r.startWhen == nil || r.precondition(a) {
				return true, nil
			}
			r.startAt.at = now.Add(r.poll) // check again after --poll
		}
		next := r.startAt.renewed.Add(r.renewEvery())
		if next.After(r.startAt.at) {
			next = r.startAt.at
		}
		if d := next.Sub(now); d > 0 {
			r.wait(d)
		}
		if r.quitting {
			return false, nil
		}
		if r.clock.Now().Before(r.startAt.renewed.Add(r.renewEvery())) {
			continue
		}
		res, err := r.call(ctx, func() (client.TaskResult, error) { return r.src.Renew(ctx) })
		switch {
		case err == nil:
			r.startAt.renewed = r.clock.Now()
			r.log.Info("claim renewed", "task", taskID, "lease_expires_at", res.LeaseExpiresAt.UTC().Format(time.RFC3339Nano),
				"replayed", res.Replayed)
		case errors.Is(err, device.ErrClaimLost):
			// Nothing ran: the claim ended on the server before start.
			r.log.Warn("claim lost while waiting before start; nothing ran, claiming again", "task", taskID, "err", err.Error())
			r.startAt = nil
			return false, nil
		default:
			return false, r.retryable(err)
		}
	}
}

// precondition runs the --start-when command (no shell, its own process
// group, the payload on stdin): exit 0 means the task may start.
func (r *runner) precondition(a *localstate.Active) bool {
	cmd := exec.Command(r.startWhen[0], r.startWhen[1:]...)
	cmd.Stdin = bytes.NewReader(a.Payload)
	cmd.Stderr = r.stderr
	setProcessGroup(cmd)
	err := cmd.Run()
	if err != nil {
		r.log.Info("start precondition not met", "task", a.TaskID, "err", err.Error())
		return false
	}
	return true
}

// startPlan is the pending start of one claim.
type startPlan struct {
	task    string
	at      time.Time // start no earlier
	renewed time.Time // last renew (or the claim)
}

// renewEvery is --renew-every, or a third of the default claim lease.
func (r *runner) renewEvery() time.Duration {
	if r.renewInterval > 0 {
		return r.renewInterval
	}
	return 200 * time.Second
}
