package projections

import (
	"fmt"
	"strings"

	"taskledger/ledger"
)

// Quiet heartbeats. A running heartbeat whose step is unchanged appends no
// event: it extends the running lease in a soft record beside the chain
// (key "lease/<execution id>", one per execution, overwritten in place),
// written in the same transaction as the batch it was decided in. Every
// event whose decision depended on the running lease records the lease it
// was judged against (running_lease_expires_at), so the chain alone shows
// that no decision was taken on an expired lease; replay checks it.

// SoftLease is the soft record of a running lease extended by a quiet
// heartbeat.
type SoftLease struct {
	TaskID         string `msgpack:"task_id"`
	ExecutionID    string `msgpack:"execution_id"`
	Generation     uint64 `msgpack:"claim_generation"`
	LeaseExpiresAt int64  `msgpack:"lease_expires_at"`
	LastSeenAt     int64  `msgpack:"last_seen_at"`
}

const softLease = "lease/"

// SoftLeaseKey is the soft-record key of an execution's running lease.
func SoftLeaseKey(executionID string) string { return softLease + executionID }

// ApplySoftLease folds a quiet heartbeat's lease into its execution. It
// only ever extends (a lease the chain already passed changes nothing), so
// applying it after any prefix of the log gives the live value.
func (s *State) ApplySoftLease(l *SoftLease) {
	t := s.Tasks[l.TaskID]
	if t == nil || t.Exec == nil || t.Exec.ID != l.ExecutionID {
		return
	}
	if l.LeaseExpiresAt > t.Exec.LeaseExpiresAt {
		t.Exec.LeaseExpiresAt = l.LeaseExpiresAt
	}
	if l.LastSeenAt > t.Exec.LastSeenAt {
		t.Exec.LastSeenAt = l.LastSeenAt
	}
}

// loadSoftLeases folds every stored soft lease into the projections.
func (s *State) loadSoftLeases(src Source) error {
	return src.SoftRecords(softLease, func(key string, v []byte) error {
		var l SoftLease
		if err := ledger.Unmarshal(v, &l); err != nil {
			return fmt.Errorf("%w: running lease %s: %v", ledger.ErrCorrupt, key, err)
		}
		if strings.TrimPrefix(key, softLease) != l.ExecutionID {
			return fmt.Errorf("%w: running lease %s names execution %s", ledger.ErrCorrupt, key, l.ExecutionID)
		}
		s.ApplySoftLease(&l)
		return nil
	})
}

// judgedLease is the running lease an event's decision was judged against:
// the one it records, or, for a schema-1 body (0), the projection's. A
// recorded lease is never before the last one the chain knows.
func judgedLease(t *Task, recorded int64) (int64, error) {
	if recorded == 0 {
		return t.Exec.LeaseExpiresAt, nil
	}
	if recorded < t.Exec.LeaseExpiresAt {
		return 0, violation("task %s decision judged against running lease %d, before the lease %d", t.ID, recorded, t.Exec.LeaseExpiresAt)
	}
	return recorded, nil
}

// HeartbeatReply is the answer to a quiet heartbeat, as of at.
func HeartbeatReply(t *Task, at int64) *Reply {
	r := taskReply(t, at)
	r.Step = t.Exec.Step
	return r
}
