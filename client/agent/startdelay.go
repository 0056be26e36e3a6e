package agent

import (
	"context"
	"errors"
	"time"

	"taskledger/client"
	"taskledger/client/device"
)

// waitBeforeStart holds a fresh claim for --start-delay before starting
// it, renewing the claim lease every --renew-every meanwhile. Each renew
// is persisted before it is sent (client/device) and replayed with the
// same key after a lost answer, as the claim is. It returns false when the
// claim is gone (lost, or the agent is leaving) and must not be started.
func (r *runner) waitBeforeStart(ctx context.Context, taskID string) (bool, error) {
	if r.startDelay <= 0 {
		return true, nil
	}
	if r.startAt == nil || r.startAt.task != taskID {
		r.startAt = &startPlan{task: taskID, at: r.clock.Now().Add(r.startDelay), renewed: r.clock.Now()}
		r.log.Info("waiting before start", "task", taskID, "delay", r.startDelay.String())
	}
	for {
		now := r.clock.Now()
		if !now.Before(r.startAt.at) {
			return true, nil
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
		res, err := r.call(ctx, func() (client.TaskResult, error) { return r.dev.Renew(ctx) })
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
