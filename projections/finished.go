package projections

import (
	"cmp"
	"encoding/binary"
	"fmt"
	"slices"

	"taskledger/ledger"
	"taskledger/wire"
)

// FinishedStore reads the on-disk read model of settled tasks
// (*ledger.Store).
type FinishedStore interface {
	ReadModelGet(bucket string, key []byte) ([]byte, error)
	ReadModelScan(bucket string, prefix, from []byte, reverse bool, fn func(k, v []byte) (bool, error)) error
}

// UseFinished makes reads of settled tasks go to the read model in f
// (the node's bbolt file). Without it a settled task reads as absent.
func (s *State) UseFinished(f FinishedStore) { s.finished, s.Idem.finished = f, f }

// Task returns the task id: from memory while it is live, from the read
// model once it settled (nil when there is no such task). The sequencer
// may ask for a task it settled in the batch it has not committed yet:
// that one is still in memory.
func (s *State) Task(id string) (*Task, error) {
	if t := s.Tasks[id]; t != nil {
		return t, nil
	}
	if t := s.toWriteIDs[id]; t != nil {
		return t, nil
	}
	if t := s.justWritten[id]; t != nil {
		return t, nil
	}
	if s.finished == nil || s.settledCounts == (stateCounts{}) {
		return nil, nil
	}
	doc, err := s.finished.ReadModelGet(RMTasks, []byte(id))
	if err != nil || doc == nil {
		return nil, err
	}
	return DecodeFinishedTask(doc)
}

// TasksNewestFirst calls fn with the tasks in descending creation order,
// below creation seq before (0: from the newest), those in memory and
// the settled ones of the read model merged, filtered by state and by the
// device of the task's claim ("": any), until fn returns false. A settled
// task is read through the read model's index of the filter.
func (s *State) TasksNewestFirst(before uint64, state wire.State, device string, fn func(t *Task) bool) error {
	match := func(t *Task) bool {
		return (state == "" || t.State == state) && (device == "" || (t.Claim != nil && t.Claim.DeviceID == device))
	}
	mem := s.taskOrder
	if device != "" {
		mem = s.heldByDevice(device)
	}
	i := len(mem) - 1
	more := true
	// memUntil gives the tasks in memory created after seq (0: all left).
	memUntil := func(seq uint64) {
		for ; more && i >= 0; i-- {
			t := mem[i]
			if t == nil || (before != 0 && t.CreateSeq >= before) {
				continue
			}
			if t.CreateSeq <= seq {
				return
			}
			if match(t) {
				more = fn(t)
			}
		}
	}
	if s.finished != nil && s.settledCounts != (stateCounts{}) && (state == "" || s.settledCounts[stateIndex(state)] > 0) {
		bucket, prefix := RMOrder, []byte(nil)
		switch {
		case device != "":
			bucket, prefix = RMDevice, RMStateKey(device, 0)[:len(device)+1]
		case state != "":
			bucket, prefix = RMState, RMStateKey(string(state), 0)[:len(state)+1]
		}
		var from []byte
		if before != 0 {
			from = append(append([]byte(nil), prefix...), binary.BigEndian.AppendUint64(nil, before-1)...)
		}
		err := s.finished.ReadModelScan(bucket, prefix, from, true, func(k, v []byte) (bool, error) {
			if len(k) < 8 {
				return false, fmt.Errorf("projections: read-model key %x of %s", k, bucket)
			}
			memUntil(binary.BigEndian.Uint64(k[len(k)-8:]))
			if !more {
				return false, nil
			}
			doc, err := s.finished.ReadModelGet(RMTasks, v)
			if err != nil {
				return false, err
			}
			if doc == nil {
				return false, fmt.Errorf("projections: read model indexes task %s without its document", v)
			}
			t, err := DecodeFinishedTask(doc)
			if err != nil {
				return false, err
			}
			if match(t) {
				more = fn(t)
			}
			return more, nil
		})
		if err != nil {
			return err
		}
	}
	memUntil(0)
	return nil
}

// heldByDevice returns the tasks in memory whose claim names device, in
// creation order. Only an open task has a claim (an ended one drops it),
// and every open task with a claim is in the held set, so the device
// filter reads that set (as large as the fleet's claims) instead of
// walking every task in memory.
func (s *State) heldByDevice(device string) []*Task {
	var ts []*Task
	s.HeldTasks(func(t *Task) bool {
		if t.Claim != nil && t.Claim.DeviceID == device {
			ts = append(ts, t)
		}
		return true
	})
	slices.SortFunc(ts, func(a, b *Task) int { return cmp.Compare(a.CreateSeq, b.CreateSeq) })
	return ts
}

var _ FinishedStore = (*ledger.Store)(nil)

// SettledNamesBlob reports whether a settled task names the blob sha (its
// reference image or evidence), through the read model's blob index.
func (s *State) SettledNamesBlob(sha string) (bool, error) {
	for _, ts := range []map[string]*Task{s.toWriteIDs, s.justWritten} {
		for _, t := range ts {
			if t.Image != nil && t.Image.SHA256 == sha {
				return true, nil
			}
			for _, e := range t.Evidence {
				if e.SHA256 == sha {
					return true, nil
				}
			}
		}
	}
	if s.finished == nil {
		return false, nil
	}
	found := false
	err := s.finished.ReadModelScan(RMBlobs, []byte(sha+"\x00"), nil, false, func(_, _ []byte) (bool, error) {
		found = true
		return false, nil
	})
	return found, err
}

// AmendedTasks calls fn with the id of every task amended at least once
// (revision > 1), live and settled (the read model's index of them), so
// that blob collection reads their streams for replaced images without
// reading every settled task.
func (s *State) AmendedTasks(fn func(id string) error) error {
	var ids []string
	for _, t := range s.taskOrder {
		if t != nil && t.Revision > 1 {
			ids = append(ids, t.ID)
		}
	}
	for _, ts := range []map[string]*Task{s.toWriteIDs, s.justWritten} {
		for _, t := range ts {
			if t.Revision > 1 {
				ids = append(ids, t.ID)
			}
		}
	}
	if s.finished != nil {
		err := s.finished.ReadModelScan(RMAmended, nil, nil, false, func(k, _ []byte) (bool, error) {
			if s.toWriteIDs[string(k)] == nil && s.justWritten[string(k)] == nil {
				ids = append(ids, string(k))
			}
			return true, nil
		})
		if err != nil {
			return err
		}
	}
	for _, id := range ids {
		if err := fn(id); err != nil {
			return err
		}
	}
	return nil
}
