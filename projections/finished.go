package projections

import (
	"cmp"
	"encoding/binary"
	"fmt"
	"slices"

	"taskledger/events"
	"taskledger/ledger"
	"taskledger/wire"
)

// FinishedStore reads the on-disk read model of settled tasks
// (*ledger.Store). StreamStart gives a settled task's creation seq from
// its id (the seq of its stream's first event), which keys its document
// (D466).
type FinishedStore interface {
	ReadModelGet(bucket string, key []byte) ([]byte, error)
	ReadModelScan(bucket string, prefix, from []byte, reverse bool, fn func(k, v []byte) (bool, error)) error
	StreamStart(stream string) (uint64, error)
}

// UseFinished makes reads of settled tasks go to the read model in f
// (the node's bbolt file), and reads back the full segments of the
// tombstone filter a snapshot left to it. Without it a settled task reads
// as absent. The error names a segment whose rows could not be read: it
// stays unread, so lookups the filter would have answered read the
// tombstone index instead (the answers are the same), and the
// projections' canonical bytes report it.
func (s *State) UseFinished(f FinishedStore) error { return s.UseFinishedWith(f, nil) }

// UseFinishedWith is UseFinished taking the full segments from ahead
// (read from f's rows before these projections were loaded) where it
// holds them; only rows read from the read model these projections are
// current with may be passed.
func (s *State) UseFinishedWith(f FinishedStore, ahead *TombFilterRows) error {
	s.finished, s.Idem.finished = f, f
	return s.Idem.filter.readBack(f, ahead)
}

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
	return settledTask(s.finished, id)
}

// settledTask reads the document of a settled task by its id: its
// creation seq from the log's stream index, then the document keyed by
// it (nil when there is none: no such task, or one not settled).
func settledTask(f FinishedStore, id string) (*Task, error) {
	seq, err := f.StreamStart(events.TaskStream(id))
	if err != nil || seq == 0 {
		return nil, err
	}
	doc, err := f.ReadModelGet(RMTasks, u64key(seq))
	if err != nil || doc == nil {
		return nil, err
	}
	t, err := DecodeFinishedTask(doc)
	if err != nil {
		return nil, err
	}
	if t.ID != id {
		return nil, fmt.Errorf("%w: the read model's document of creation seq %d is task %s, not %s", ledger.ErrCorrupt, seq, t.ID, id)
	}
	return t, nil
}

// LiveNewestFirst calls fn with the tasks in memory in descending
// creation order, below creation seq before (0: from the newest),
// filtered by state and by the device of the task's claim ("": any),
// until fn returns false. The settled ones are SettledReader's.
func (s *State) LiveNewestFirst(before uint64, state wire.State, device string, fn func(t *Task) bool) {
	mem := s.taskOrder
	if device != "" {
		mem = s.heldByDevice(device)
	}
	for i := len(mem) - 1; i >= 0; i-- {
		t := mem[i]
		if t == nil || (before != 0 && t.CreateSeq >= before) || !taskMatches(t, state, device) {
			continue
		}
		if !fn(t) {
			return
		}
	}
}

func taskMatches(t *Task, state wire.State, device string) bool {
	return (state == "" || t.State == state) && (device == "" || (t.Claim != nil && t.Claim.DeviceID == device))
}

// SettledReader reads the settled tasks of the read model on disk. It
// keeps nothing the sequencer changes, so a reader takes it under the
// engine's lock and reads the disk after releasing it: settled tasks never
// change, and a write path never waits for a read of the disk. What it
// reads is the read model as committed when it reads, so a task that
// settled after it was taken is there too (and was in memory when it was
// taken): callers merging both drop the second copy.
type SettledReader struct {
	f      FinishedStore
	counts stateCounts
}

// SettledTasks returns the reader of the settled tasks as the
// projections know them now.
func (s *State) SettledTasks() SettledReader {
	return SettledReader{f: s.finished, counts: s.settledCounts}
}

// NewestFirst calls fn with the settled tasks in descending creation
// order, below creation seq before (0: from the newest), filtered as
// LiveNewestFirst filters, until fn returns false. A settled task is read
// through the read model's index of the filter.
func (r SettledReader) NewestFirst(before uint64, state wire.State, device string, fn func(t *Task) bool) error {
	if r.f == nil || r.counts == (stateCounts{}) || (state != "" && r.counts[stateIndex(state)] == 0) {
		return nil
	}
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
	return r.f.ReadModelScan(bucket, prefix, from, true, func(k, v []byte) (bool, error) {
		if len(k) < 8 {
			return false, fmt.Errorf("projections: read-model key %x of %s", k, bucket)
		}
		doc, err := r.f.ReadModelGet(RMTasks, k[len(k)-8:]) // every index key ends with the creation seq
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
		if !taskMatches(t, state, device) {
			return true, nil
		}
		return fn(t), nil
	})
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
