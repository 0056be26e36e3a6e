package commands

import (
	"net/http"

	"taskledger/ledger"
	"taskledger/projections"
)

// quietHeartbeat decides a running heartbeat whose step is unchanged: no
// event. The extended lease is a soft record (one per execution,
// overwritten in place) and the outcome a soft idempotency record, both
// written in the transaction of the batch this decision joins, so the
// answer, released only after that commit, is durable.
func (c *TaskCall) quietHeartbeat(x *Ctx, t *projections.Task, scope string) (*Decision, error) {
	lease := &projections.SoftLease{TaskID: t.ID, ExecutionID: t.Exec.ID, Generation: t.Claim.Generation,
		LeaseExpiresAt: x.Now + x.Cfg.RunningLease.Milliseconds(), LastSeenAt: x.Now}
	rawLease, err := ledger.Marshal(lease)
	if err != nil {
		return nil, err
	}
	// The answer is the task as it will be once the lease is applied.
	view := *t
	exec := *t.Exec
	exec.LeaseExpiresAt, exec.LastSeenAt = lease.LeaseExpiresAt, lease.LastSeenAt
	view.Exec = &exec
	rec := &projections.IdemRecord{Scope: scope, Key: c.Key, Fingerprint: c.Fingerprint, At: x.Now,
		Status: http.StatusOK, TaskID: t.ID, DeviceID: c.Device.DeviceID, EventType: projections.EvTaskHeartbeat,
		Reply: projections.HeartbeatReply(&view, x.Now)}
	rawRec, err := ledger.Marshal(rec)
	if err != nil {
		return nil, err
	}
	return &Decision{
		Soft: []ledger.SoftRecord{{Key: projections.SoftLeaseKey(t.Exec.ID), Value: rawLease},
			{Key: SoftIdemKey(scope, c.Key), Value: rawRec}},
		Effect: func(s *projections.State) {
			s.ApplySoftLease(lease)
			s.Idem.PutSoft(rec)
		},
		Answer: func(*projections.State) Result { return Result{Record: rec} },
	}, nil
}
