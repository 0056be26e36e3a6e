package projections

import (
	"bytes"
	"container/heap"
	"encoding/binary"
	"fmt"
	"slices"

	"taskledger/ledger"
)

// The on-disk read model of finished tasks (docs/architecture.md, "Finished
// tasks on disk"). A task is settled once it ended and every idempotency
// record about it expired: its last event (UpdatedAt: every task event
// that records a key touches it, and no event applies to an ended task) is
// older than the retention at the newest event's time. Nothing decided
// later can refer to a settled task but to read it. Its document and index
// entries are written to the read-model buckets in the transaction of the
// batch whose newest event settles it, so the buckets hold exactly the
// tasks settled at the log's head: a pure function of the log.
const (
	// ReadModelVersion changes whenever the buckets' layout or documents
	// change: a read model of another version is rebuilt at start.
	ReadModelVersion = 1

	RMTasks   = ledger.ReadModelPrefix + "tasks"   // task id → document (one task of the snapshot's task encoding)
	RMOrder   = ledger.ReadModelPrefix + "order"   // creation seq (8 bytes) → task id
	RMState   = ledger.ReadModelPrefix + "state"   // state, 0, creation seq → task id
	RMDevice  = ledger.ReadModelPrefix + "device"  // claim's device id, 0, creation seq → task id
	RMUpdated = ledger.ReadModelPrefix + "updated" // updated_at (8 bytes), creation seq → task id
	RMMeta    = ledger.ReadModelPrefix + "meta"    // "head" → seq; "version" → version, schema, retention
)

var (
	rmKeyHead    = []byte("head")
	rmKeyVersion = []byte("version")
)

// settleEntry is a terminal task not yet settled, by when it settles.
type settleEntry struct {
	at int64
	t  *Task
}

type settleHeap []settleEntry

func (h settleHeap) Len() int           { return len(h) }
func (h settleHeap) Less(i, j int) bool { return h[i].at < h[j].at }
func (h settleHeap) Swap(i, j int)      { h[i], h[j] = h[j], h[i] }
func (h *settleHeap) Push(x any)        { *h = append(*h, x.(settleEntry)) }
func (h *settleHeap) Pop() any {
	old := *h
	x := old[len(old)-1]
	old[len(old)-1] = settleEntry{}
	*h = old[:len(old)-1]
	return x
}

// settledAt is when an ended task settles (0: never, records never
// expire).
func (s *State) settledAt(t *Task) int64 {
	if s.cfg.IdempotencyRetentionMs <= 0 {
		return 0
	}
	return t.UpdatedAt + s.cfg.IdempotencyRetentionMs
}

// Settled reports whether t is settled at the head: ended, and every
// record about it expired.
func (s *State) Settled(t *Task) bool {
	at := s.settledAt(t)
	return t.Terminal() && at != 0 && at <= s.Head.At
}

// ended queues a task that just ended to settle.
func (s *State) ended(t *Task) {
	if at := s.settledAt(t); at != 0 {
		heap.Push(&s.settling, settleEntry{at: at, t: t})
	}
}

// popSettled removes from the queue every task settled at the head.
func (s *State) popSettled(fn func(t *Task)) {
	for len(s.settling) > 0 && s.settling[0].at <= s.Head.At {
		e := heap.Pop(&s.settling).(settleEntry)
		if cur := s.Tasks[e.t.ID]; cur != nil && s.Settled(cur) {
			fn(cur) // the task in the map: an unshared copy is the same task
		}
	}
}

// SettleLoaded marks the tasks settled at the head of freshly loaded
// projections as written: their documents are on disk already (the node
// checks the read model's head against the log's, and rebuilds it when
// they differ).
func (s *State) SettleLoaded() { s.popSettled(func(*Task) {}) }

// TakeReadModel returns the read-model writes of the tasks settled since
// the last call (or SettleLoaded), and the read model's new head: what the
// batch whose newest event is the head writes beside its events.
func (s *State) TakeReadModel() ([]ledger.ReadModelWrite, error) {
	var ws []ledger.ReadModelWrite
	var err error
	s.popSettled(func(t *Task) {
		if err == nil {
			ws, err = appendTaskWrites(ws, t)
		}
	})
	if err != nil {
		return nil, err
	}
	return append(ws, rmHeadWrite(s.Head.Seq)), nil
}

// ReadModelWrites is the whole read model at the head, as a rebuild writes
// it (after ResetReadModel) and as verify expects to find it.
func (s *State) ReadModelWrites() ([]ledger.ReadModelWrite, error) {
	var ws []ledger.ReadModelWrite
	for _, t := range s.taskOrder {
		if !s.Settled(t) {
			continue
		}
		var err error
		if ws, err = appendTaskWrites(ws, t); err != nil {
			return nil, err
		}
	}
	return append(ws, rmHeadWrite(s.Head.Seq), ledger.ReadModelWrite{Bucket: RMMeta, Key: rmKeyVersion, Value: s.rmVersion()}), nil
}

// rmVersion is what a read model must have been written with to be kept:
// its layout, the projections' schema and the retention that settles
// tasks.
func (s *State) rmVersion() []byte {
	v := make([]byte, 24)
	binary.BigEndian.PutUint64(v, ReadModelVersion)
	binary.BigEndian.PutUint64(v[8:], SchemaVersion)
	binary.BigEndian.PutUint64(v[16:], uint64(s.cfg.IdempotencyRetentionMs))
	return v
}

// ReadModelCurrent reports whether a read model whose meta bucket holds
// head and version (nil when absent) is the one of these projections: same
// version, schema and retention, written up to the same head.
func (s *State) ReadModelCurrent(head, version []byte) bool {
	return bytes.Equal(version, s.rmVersion()) && bytes.Equal(head, u64key(s.Head.Seq))
}

func rmHeadWrite(seq uint64) ledger.ReadModelWrite {
	return ledger.ReadModelWrite{Bucket: RMMeta, Key: rmKeyHead, Value: u64key(seq)}
}

// RMHeadKey and RMVersionKey are the meta bucket's keys.
func RMHeadKey() []byte    { return slices.Clone(rmKeyHead) }
func RMVersionKey() []byte { return slices.Clone(rmKeyVersion) }

func u64key(v uint64) []byte { return binary.BigEndian.AppendUint64(nil, v) }

// appendTaskWrites appends the document and index entries of a settled
// task.
func appendTaskWrites(ws []ledger.ReadModelWrite, t *Task) ([]ledger.ReadModelWrite, error) {
	doc, err := encodeTaskChunk([]*Task{t})
	if err != nil {
		return nil, fmt.Errorf("projections: read-model document of task %s: %w", t.ID, err)
	}
	id := []byte(t.ID)
	seq := u64key(t.CreateSeq)
	ws = append(ws,
		ledger.ReadModelWrite{Bucket: RMTasks, Key: id, Value: doc},
		ledger.ReadModelWrite{Bucket: RMOrder, Key: seq, Value: id},
		ledger.ReadModelWrite{Bucket: RMState, Key: RMStateKey(string(t.State), t.CreateSeq), Value: id},
		ledger.ReadModelWrite{Bucket: RMUpdated, Key: append(u64key(uint64(t.UpdatedAt)), seq...), Value: id},
	)
	if t.Claim != nil {
		ws = append(ws, ledger.ReadModelWrite{Bucket: RMDevice, Key: RMStateKey(t.Claim.DeviceID, t.CreateSeq), Value: id})
	}
	return ws, nil
}

// RMStateKey is the key of a state (or device) index entry: the name, a
// zero byte and the creation seq, so that one name's entries are in
// creation order.
func RMStateKey(name string, createSeq uint64) []byte {
	k := make([]byte, 0, len(name)+9)
	k = append(append(k, name...), 0)
	return binary.BigEndian.AppendUint64(k, createSeq)
}

// DecodeFinishedTask decodes a read-model document.
func DecodeFinishedTask(doc []byte) (*Task, error) {
	tasks := make([]Task, 1)
	order := make([]*Task, 1)
	var idx taskIndexes
	var s State
	if err := s.decodeTaskChunk(string(doc), tasks, order, &idx); err != nil {
		return nil, fmt.Errorf("projections: read-model document: %w", err)
	}
	return &tasks[0], nil
}
