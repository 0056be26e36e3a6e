package projections

import (
	"bytes"
	"container/heap"
	"encoding/binary"
	"fmt"
	"maps"
	"slices"

	"taskledger/ledger"
)

// The on-disk read model of finished tasks (docs/architecture.md, "Finished
// tasks on disk"). A task is settled as soon as it ended (D456): no event
// applies to an ended task, and nothing decided later needs it in memory —
// a replay of a record about it answers from the record (device commands)
// or reads its document (operator commands, reads), and a device command
// on it is refused alike whether it is in memory or not. Its document and index
// entries are written to the read-model buckets in the transaction of the
// batch whose newest event settles it, so the buckets hold exactly the
// tasks settled at the log's head: a pure function of the log.
const (
	// RMTombstones is the read model's index of expired keys.
	RMTombstones = RMTombs

	// ReadModelVersion changes whenever the buckets' layout or documents
	// change: a read model of another version is rebuilt at start.
	ReadModelVersion = 3

	RMTasks   = ledger.ReadModelPrefix + "tasks"      // creation seq (8 bytes) → document (one task of the snapshot's task encoding), D466
	RMOrder   = ledger.ReadModelPrefix + "order"      // creation seq (8 bytes) → task id
	RMState   = ledger.ReadModelPrefix + "state"      // state, 0, creation seq → task id
	RMDevice  = ledger.ReadModelPrefix + "device"     // claim's device id, 0, creation seq → task id
	RMUpdated = ledger.ReadModelPrefix + "updated"    // updated_at (8 bytes), creation seq → task id
	RMAmended = ledger.ReadModelPrefix + "amended"    // task id of a settled task amended at least once (revision > 1) → empty
	RMTombs   = ledger.ReadModelPrefix + "tombstones" // SHA-256 of an expired key's scope and key (32 bytes) → empty
	RMBlobs   = ledger.ReadModelPrefix + "blobs"      // blob sha256 (hex), 0, task id → task id: the images and evidence it names
	RMRecords = ledger.ReadModelPrefix + "records"    // seq (8 bytes) → the idempotency record its event made, while it has not expired
	RMFilter  = ledger.ReadModelPrefix + "filter"     // segment, chunk (4 bytes each) → 64 KiB of a full tombstone-filter segment's bits
	RMMeta    = ledger.ReadModelPrefix + "meta"       // "head" → seq; "counts" → settled tasks per state; "version" → version, schema, retention
)

var (
	rmKeyHead    = []byte("head")
	rmKeyVersion = []byte("version")
	rmKeyCounts  = []byte("counts")
)

// Settled reports whether t is settled: ended, on projections that keep
// a read model (not KeepSettled) and whose records expire (with no
// retention nothing settles: every task stays, as before the read model).
func (s *State) Settled(t *Task) bool {
	return t.Terminal() && s.cfg.IdempotencyRetentionMs > 0 && !s.cfg.KeepSettled
}

// ended queues a task that just ended to settle at the end of the fold of
// its event.
func (s *State) ended(t *Task) {
	if s.Settled(t) {
		s.settling = append(s.settling, t)
	}
}

// settle evicts every task settled at the head from the projections: it
// leaves the map and the creation order, its count moves to the settled
// counts, and it waits in toWrite until the sequencer takes the batch's
// read-model writes (TakeReadModel) or a load marks it written
// (SettleLoaded). Run after every event and at the end of a restore, so
// that the projections at a head hold the same tasks however they were
// built.
func (s *State) settle() {
	if s.cfg.KeepSettled {
		return
	}
	for _, e := range s.settling {
		t := s.Tasks[e.ID]
		if t == nil || !s.Settled(t) {
			continue
		}
		delete(s.Tasks, t.ID)
		if s.orderShared { // a capture reads the order: it gets its own from now on
			s.taskOrder, s.orderShared = slices.Clone(s.taskOrder), false
		}
		s.taskOrder[t.pos] = nil
		s.orderHoles++
		s.counts.move(t.State, "")
		s.settledCounts.move("", t.State)
		if s.onSettle != nil {
			if s.settleErr == nil {
				s.settleErr = s.onSettle(t)
			}
		} else {
			if s.toWriteIDs == nil {
				s.toWriteIDs = map[string]*Task{}
			}
			s.toWrite = append(s.toWrite, t)
			s.toWriteIDs[t.ID] = t
		}
	}
	if s.orderHoles > 1024 && s.orderHoles > len(s.taskOrder)/2 {
		s.compactOrder()
	}
	clear(s.settling)
	s.settling = s.settling[:0]
	if cap(s.settling) > 1024 {
		s.settling = nil // a restore queued every ended task at once
	}
}

// shareOrder returns the creation order for a capture, which reads it
// while the projections go on: a settled task's hole is then made in a
// copy.
func (s *State) shareOrder() []*Task {
	s.orderShared = true
	return s.taskOrder
}

// compactOrder drops the holes settled tasks left in the creation order
// (into a new slice: a capture may share the old one).
func (s *State) compactOrder() {
	order := make([]*Task, 0, len(s.taskOrder)-s.orderHoles)
	for _, t := range s.taskOrder {
		if t != nil {
			t.pos = len(order)
			order = append(order, t)
		}
	}
	s.taskOrder, s.orderHoles, s.orderShared = order, 0, false
	tasks := make(map[string]*Task, len(order)) // a map never shrinks: the settled ones' room goes
	for _, t := range order {
		tasks[t.ID] = t
	}
	s.Tasks = tasks
	// The claim indexes drop stale entries lazily, at their top: those of
	// settled tasks (never claimed, or claimed long ago) go now, which a
	// claim decision would skip anyway.
	s.queue = slices.Clone(slices.DeleteFunc(s.queue, func(e queueEntry) bool {
		t := s.Tasks[e.taskID]
		return t == nil || t.queueEpoch != e.epoch
	}))
	heap.Init(&s.queue)
	s.claimExpiry = slices.Clone(slices.DeleteFunc(s.claimExpiry, func(e expiryEntry) bool { return s.Tasks[e.taskID] == nil }))
	heap.Init(&s.claimExpiry)
}

// SettleLoaded marks the tasks settled by freshly loaded projections as
// written: their documents are on disk already (the node checks the read
// model's head against the log's, and rebuilds it when they differ).
func (s *State) SettleLoaded() {
	s.toWrite, s.toWriteIDs, s.justWritten = nil, nil, nil
	s.Idem.tombsWritten()
	s.Idem.recordsOnDisk()
}

// TombWrite is the read-model write of a tombstone (an expired key's
// SHA-256).
func TombWrite(t string) ledger.ReadModelWrite {
	return ledger.ReadModelWrite{Bucket: RMTombs, Key: []byte(t), Value: []byte{}}
}

// TakeReadModel returns the read-model writes of the tasks settled since
// the last call (or SettleLoaded), the settled counts and the read
// model's new head: what the batch whose newest event is the head writes
// beside its events. The tasks stay readable from memory until the next
// call (their batch commits first: TakeReadModel runs only when nothing
// is in flight).
func (s *State) TakeReadModel() ([]ledger.ReadModelWrite, error) {
	var ws []ledger.ReadModelWrite
	for _, t := range s.toWrite {
		var err error
		if ws, err = appendTaskWrites(ws, t); err != nil {
			return nil, err
		}
	}
	s.justWritten, s.toWrite, s.toWriteIDs = s.toWriteIDs, nil, nil
	for _, t := range s.Idem.drainTombs() {
		ws = append(ws, TombWrite(t))
	}
	ws = append(ws, s.Idem.drainRecordWrites()...)
	return append(ws, rmHeadWrite(s.Head.Seq), s.rmCountsWrite()), nil
}

// SettledCountsFrom sets the settled tasks' counts per state from the read
// model's meta record (nil: none), after a load from a snapshot, which
// holds no settled task.
func (s *State) SettledCountsFrom(v []byte) error {
	var c stateCounts
	if v != nil {
		if len(v) != 8*len(c) {
			return fmt.Errorf("projections: read-model counts of %d bytes", len(v))
		}
		for i := range c {
			c[i] = int(binary.BigEndian.Uint64(v[8*i:]))
		}
	}
	s.settledCounts = c
	return nil
}

func (s *State) rmCountsWrite() ledger.ReadModelWrite {
	v := make([]byte, 0, 8*len(s.settledCounts))
	for _, n := range s.settledCounts {
		v = binary.BigEndian.AppendUint64(v, uint64(n))
	}
	return ledger.ReadModelWrite{Bucket: RMMeta, Key: rmKeyCounts, Value: v}
}

// ReadModelMeta is what a replay that settled every task writes last: the
// head, the settled counts and the version.
func (s *State) ReadModelMeta() []ledger.ReadModelWrite {
	return []ledger.ReadModelWrite{rmHeadWrite(s.Head.Seq), s.rmCountsWrite(),
		{Bucket: RMMeta, Key: rmKeyVersion, Value: s.rmVersion()}}
}

// EachRecordRow hands fn, in seq order, the rows of the records a replay
// followed (those alive at its head, and those an order entry still
// names), then forgets them. Each row is encoded as it is handed over: a
// rebuild commits them in slices rather than holding them all.
func (s *State) EachRecordRow(fn func(ledger.ReadModelWrite) error) error {
	var x recordRowEnc
	for _, seq := range slices.Sorted(maps.Keys(s.Idem.rows)) {
		if err := fn(x.write(s.Idem.rows[seq])); err != nil {
			return err
		}
	}
	s.Idem.rows = nil
	return nil
}

// EachFilterRow hands fn the rows of every full segment of the tombstone
// filter (those a live node wrote as each one filled), in key order: a
// rebuild writes them, a verifier compares them.
func (s *State) EachFilterRow(fn func(ledger.ReadModelWrite) error) error {
	f := &s.Idem.filter
	for i := range f.fullSegs() {
		for _, w := range f.segRows(i) {
			if err := fn(w); err != nil {
				return err
			}
		}
	}
	return nil
}

// TaskWrites are the read-model writes of a settled task (its document
// and index entries).
func TaskWrites(t *Task) ([]ledger.ReadModelWrite, error) { return appendTaskWrites(nil, t) }

// DiscardSettled makes the projections drop tasks as they settle (a
// verifier's replay, which only checks the log).
func (s *State) DiscardSettled() { s.OnSettle(func(*Task) {}) }

// OnSettle makes the projections hand every task to fn as it settles, and
// drop it and the expired keys' tombstones, instead of keeping them for
// the read model: a replay that only reads (provenance reads one task
// after its last event).
func (s *State) OnSettle(fn func(t *Task)) {
	s.onSettle = func(t *Task) error { fn(t); return nil }
	s.Idem.onTomb = func(string) {}
}

// rmVersion is what a read model must have been written with to be kept:
// its layout, the projections' schema and the retention that settles
// tasks.
func (s *State) rmVersion() []byte { return rmVersion(s.cfg) }

func rmVersion(cfg Config) []byte {
	v := make([]byte, 24)
	binary.BigEndian.PutUint64(v, ReadModelVersion)
	binary.BigEndian.PutUint64(v[8:], SchemaVersion)
	binary.BigEndian.PutUint64(v[16:], uint64(cfg.IdempotencyRetentionMs))
	return v
}

// ReadModelCurrent reports whether a read model whose meta bucket holds
// head and version (nil when absent) is the one of these projections: same
// version, schema and retention, written up to the same head.
func (s *State) ReadModelCurrent(head, version []byte) bool {
	return ReadModelCurrentAt(s.cfg, s.Head.Seq, head, version)
}

// ReadModelCurrentAt reports whether a read model whose meta bucket holds
// head and version is the one of projections derived with cfg up to seq
// (a start that must replay the whole log asks before it replays).
func ReadModelCurrentAt(cfg Config, seq uint64, head, version []byte) bool {
	return bytes.Equal(version, rmVersion(cfg)) && bytes.Equal(head, u64key(seq))
}

func rmHeadWrite(seq uint64) ledger.ReadModelWrite {
	return ledger.ReadModelWrite{Bucket: RMMeta, Key: rmKeyHead, Value: u64key(seq)}
}

// RMHeadKey, RMVersionKey and RMCountsKey are the meta bucket's keys.
func RMHeadKey() []byte    { return slices.Clone(rmKeyHead) }
func RMCountsKey() []byte  { return slices.Clone(rmKeyCounts) }
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
		ledger.ReadModelWrite{Bucket: RMTasks, Key: seq, Value: doc},
		ledger.ReadModelWrite{Bucket: RMOrder, Key: seq, Value: id},
		ledger.ReadModelWrite{Bucket: RMState, Key: RMStateKey(string(t.State), t.CreateSeq), Value: id},
		ledger.ReadModelWrite{Bucket: RMUpdated, Key: append(u64key(uint64(t.UpdatedAt)), seq...), Value: id},
	)
	if t.Claim != nil {
		ws = append(ws, ledger.ReadModelWrite{Bucket: RMDevice, Key: RMStateKey(t.Claim.DeviceID, t.CreateSeq), Value: id})
	}
	if t.Revision > 1 {
		ws = append(ws, ledger.ReadModelWrite{Bucket: RMAmended, Key: id, Value: []byte{}})
	}
	blob := func(sha string) {
		ws = append(ws, ledger.ReadModelWrite{Bucket: RMBlobs, Key: []byte(sha + "\x00" + t.ID), Value: id})
	}
	if t.Image != nil {
		blob(t.Image.SHA256)
	}
	for _, e := range t.Evidence {
		blob(e.SHA256)
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
