package projections

import (
	"errors"
	"testing"

	"taskledger/ledger"
)

// runningTask is a RUNNING task at version 3 whose chain-recorded running
// lease ends at 1000.
func runningTask(s *State) *Task {
	t := &Task{ID: "t", State: StateRunning, Version: 3, StreamVersion: 5, Generation: 1,
		Claim: &Claim{Generation: 1, DeviceID: "d"},
		Exec:  &Execution{ID: "x", LeaseExpiresAt: 1000}}
	s.Tasks[t.ID] = t
	s.Devices["d"] = &Device{ID: "d", Status: DeviceStatusActive, OpenTask: "t"}
	return t
}

func completedAt(at, lease int64) (*ledger.Event, *TaskCompleted) {
	return &ledger.Event{Seq: 1, Stream: "task/t", StreamVersion: 6, Type: EvTaskCompleted, At: at},
		&TaskCompleted{TaskID: "t", DeviceID: "d", Generation: 1, ExecutionID: "x", Version: 4, Result: "{}", RunningLease: lease}
}

// Replay (and so verify) refuses a decision taken at or after the running
// lease its event records, and a recorded lease older than the chain's.
func TestDecisionOnExpiredRunningLeaseIsRefused(t *testing.T) {
	for _, tc := range []struct {
		name      string
		at, lease int64
		ok        bool
	}{
		{"inside the chain's lease", 999, 1000, true},
		{"inside a quiet heartbeat's lease", 1500, 1600, true},
		{"at the recorded lease", 1600, 1600, false},
		{"recorded lease older than the chain's", 900, 950, false},
		{"schema 1 (no recorded lease), inside", 999, 0, true},
		{"schema 1 (no recorded lease), at expiry", 1000, 0, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := New(Config{})
			task := runningTask(s)
			e, b := completedAt(tc.at, tc.lease)
			err := s.apply(e, b)
			if tc.ok != (err == nil) {
				t.Fatalf("apply: %v, want ok=%v", err, tc.ok)
			}
			if err != nil && !errors.Is(err, ErrInvariant) {
				t.Fatalf("error %v is not an invariant violation", err)
			}
			if tc.ok && task.State != StateSucceeded {
				t.Fatalf("state %s", task.State)
			}
		})
	}
}

// A soft lease only extends: applied after the chain passed it, it changes
// nothing; for another execution it changes nothing.
func TestSoftLeaseOnlyExtends(t *testing.T) {
	s := New(Config{})
	task := runningTask(s)
	s.ApplySoftLease(&SoftLease{TaskID: "t", ExecutionID: "x", LeaseExpiresAt: 900, LastSeenAt: 1})
	if task.Exec.LeaseExpiresAt != 1000 {
		t.Fatalf("an older soft lease moved the lease to %d", task.Exec.LeaseExpiresAt)
	}
	s.ApplySoftLease(&SoftLease{TaskID: "t", ExecutionID: "other", LeaseExpiresAt: 5000})
	if task.Exec.LeaseExpiresAt != 1000 {
		t.Fatalf("another execution's lease applied")
	}
	s.ApplySoftLease(&SoftLease{TaskID: "t", ExecutionID: "x", LeaseExpiresAt: 1600, LastSeenAt: 1510})
	if task.Exec.LeaseExpiresAt != 1600 || task.Exec.LastSeenAt != 1510 {
		t.Fatalf("lease %d last seen %d", task.Exec.LeaseExpiresAt, task.Exec.LastSeenAt)
	}
}
