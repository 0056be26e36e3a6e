package projections

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"maps"
	"math/rand/v2"
	"reflect"
	"testing"

	"taskledger/events"
	"taskledger/ledger"
)

// recordRow is a record's row as a lone encoder writes it.
func recordRow(r *IdemRecord) ledger.ReadModelWrite {
	var x recordRowEnc
	return x.write(r)
}

// memReadModel is a read model in memory: the batches' writes applied in
// order.
type memReadModel map[string][]byte

func (m memReadModel) apply(ws []ledger.ReadModelWrite) {
	for _, w := range ws {
		k := w.Bucket + "\x00" + string(w.Key)
		if w.Value == nil {
			delete(m, k)
		} else {
			m[k] = bytes.Clone(w.Value)
		}
	}
}

func (m memReadModel) ReadModelGet(bucket string, key []byte) ([]byte, error) {
	return m[bucket+"\x00"+string(key)], nil
}

func (m memReadModel) ReadModelScan(string, []byte, []byte, bool, func(k, v []byte) (bool, error)) error {
	return errors.New("memReadModel: no scans")
}

func (m memReadModel) StreamStart(string) (uint64, error) {
	return 0, errors.New("memReadModel: no stream index")
}

// rows returns the records bucket's rows.
func (m memReadModel) rows() map[string]string { return m.bucket(RMRecords) }

// bucket returns one bucket's rows.
func (m memReadModel) bucket(name string) map[string]string {
	out := map[string]string{}
	for k, v := range m {
		if bucket, key, _ := bytes.Cut([]byte(k), []byte{0}); string(bucket) == name {
			out[string(key)] = string(v)
		}
	}
	return out
}

// replayRows is what a replay that followed the bucket (RebuildSettling)
// writes.
func replayRows(t *testing.T, s *State) map[string]string {
	t.Helper()
	out := map[string]string{}
	if err := s.EachRecordRow(func(w ledger.ReadModelWrite) error {
		out[string(w.Key)] = string(w.Value)
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	return out
}

// TestRecordRowsFollowTheOrderThroughSnapshots: the records bucket a live
// view writes batch by batch holds the same rows as a replay of the same
// history computes, also when the live view was restored from snapshots
// that name records by seq on the way (ids recorded again while alive and
// after they left included: the paths only logs no command writes take),
// and a view restored from such a snapshot finds every record, whole,
// through the read model.
func TestRecordRowsFollowTheOrderThroughSnapshots(t *testing.T) {
	const retention = 50
	rng := rand.New(rand.NewPCG(3, 4))
	cfg := Config{IdempotencyRetentionMs: retention}
	rm := memReadModel{}
	live := New(cfg)
	live.Idem.recordsOnDisk()
	live.UseFinished(rm)
	replay := New(cfg) // follows the bucket as a rebuild does
	replay.Idem.rows = map[uint64]*IdemRecord{}
	at := int64(0)
	restores := 0
	for step := range 900 {
		at += rng.Int64N(3)
		seq := uint64(step + 1)
		k := fmt.Sprint("k", rng.IntN(40)) // ids come back: recorded again while alive, or after they left
		for _, s := range []*State{live, replay} {
			s.Idem.put(&IdemRecord{Scope: "device:d:op", Key: k, At: at, Seq: seq, Outcome: OutcomeAccepted,
				TaskID: fmt.Sprint("task-", step), Fingerprint: []byte{byte(step)}, Reply: &Reply{State: "RUNNING", Version: seq}})
			s.Head = ledger.Head{Seq: seq, Hash: bytes.Repeat([]byte{1}, ledger.HashSize), At: at}
			s.Idem.expire(at, retention)
		}
		rm.apply(live.Idem.drainRecordWrites())
		if step%97 != 50 {
			continue
		}
		// A snapshot names records by seq; the view restored from it goes
		// on as the live one.
		snap, err := live.Capture().EncodeSnapshot()
		if err != nil {
			t.Fatal(err)
		}
		full := must(live.Canonical())
		r, err := Restore(snap, cfg)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := r.Idem.allRecords(); !errors.Is(err, errNoReadModel) {
			t.Fatalf("step %d: records named by seq read without a read model: %v", step, err)
		}
		r.UseFinished(rm)
		r.SettleLoaded()
		if got, want := must(r.Idem.allRecords()), must(live.Idem.allRecords()); !reflect.DeepEqual(got, want) {
			t.Fatalf("step %d: %d records restored, %d live", step, len(got), len(want))
		}
		if got := must(r.Canonical()); !bytes.Equal(got, full) {
			t.Fatalf("step %d: the restored view's canonical bytes differ from the live view's", step)
		}
		live = r
		restores++
	}
	if restores < 5 {
		t.Fatalf("only %d restores", restores)
	}
	// Every alive record has its row, and no row outlives both its
	// record and the order's entries that name it.
	named := map[uint64]bool{}
	for _, e := range replay.Idem.Order {
		named[e.Rec.Seq] = true
	}
	for _, r := range replay.Idem.Records {
		named[r.Seq] = true
		if replay.Idem.rows[r.Seq] != r {
			t.Fatalf("the alive record of seq %d has no row", r.Seq)
		}
	}
	for seq := range replay.Idem.rows {
		if !named[seq] {
			t.Fatalf("the row of seq %d stays, and nothing names its record", seq)
		}
	}
	want := replayRows(t, replay)
	got := rm.rows()
	if len(want) == 0 || !maps.Equal(got, want) {
		t.Fatalf("records bucket: %d rows, a replay writes %d", len(got), len(want))
	}
	if !bytes.Equal(must(live.Canonical()), must(replay.Canonical())) {
		t.Fatal("the live view, restored on the way, differs from the replay")
	}
}

// TestAMissingRecordRowIsAnError: a record a snapshot names by seq whose
// row is gone, or is another record's, is not answered as found.
func TestAMissingRecordRowIsAnError(t *testing.T) {
	cfg := Config{IdempotencyRetentionMs: 1000}
	rm := memReadModel{}
	s := New(cfg)
	s.Idem.recordsOnDisk()
	s.UseFinished(rm)
	s.Head = ledger.Head{Seq: 2, Hash: bytes.Repeat([]byte{1}, ledger.HashSize), At: 10}
	s.Idem.put(&IdemRecord{Scope: "device:d:op", Key: "a", At: 10, Seq: 1})
	s.Idem.put(&IdemRecord{Scope: "device:d:op", Key: "b", At: 10, Seq: 2})
	rm.apply(s.Idem.drainRecordWrites())
	r, err := Restore(must(s.Capture().EncodeSnapshot()), cfg)
	if err != nil {
		t.Fatal(err)
	}
	r.UseFinished(rm)
	if rec, expired := r.Idem.Lookup("device:d:op", "a", 10, 1000); rec == nil || expired || rec.Seq != 1 {
		t.Fatalf("lookup of a: %#v, expired %v", rec, expired)
	}
	rm[RMRecords+"\x00"+string(u64key(1))] = rm[RMRecords+"\x00"+string(u64key(2))] // b's row under a's seq
	if _, err := r.Idem.loadedRecord(IdemID("device:d:op", "a")); err == nil {
		t.Fatal("another record's row was taken for a")
	}
	delete(rm, RMRecords+"\x00"+string(u64key(2)))
	if _, err := r.Idem.loadedRecord(IdemID("device:d:op", "b")); err == nil {
		t.Fatal("a missing row was not an error")
	}
	// Lookup changes nothing on such a key: it answers as for an expired one.
	if rec, expired := r.Idem.Lookup("device:d:op", "b", 10, 1000); rec != nil || !expired {
		t.Fatalf("lookup of b with its row gone: %#v, expired %v", rec, expired)
	}
}

// TestAnIDRecordedThriceLeavesNoRow: an id recorded three times while
// alive (only logs no command writes do that) leaves no row behind once
// every recording expired, live or restored from a snapshot between.
func TestAnIDRecordedThriceLeavesNoRow(t *testing.T) {
	for _, restore := range []bool{false, true} {
		cfg := Config{IdempotencyRetentionMs: 10}
		rm := memReadModel{}
		s := New(cfg)
		s.Idem.recordsOnDisk()
		s.UseFinished(rm)
		for seq := uint64(1); seq <= 3; seq++ {
			s.Head = ledger.Head{Seq: seq, Hash: bytes.Repeat([]byte{1}, ledger.HashSize), At: int64(seq)}
			s.Idem.put(&IdemRecord{Scope: "device:d:op", Key: "same", At: int64(seq), Seq: seq})
			s.Idem.expire(int64(seq), 10)
		}
		rm.apply(s.Idem.drainRecordWrites())
		if n := len(rm.rows()); n != 3 {
			t.Fatalf("%d rows for three recordings", n)
		}
		if restore {
			r, err := Restore(must(s.Capture().EncodeSnapshot()), cfg)
			if err != nil {
				t.Fatal(err)
			}
			r.UseFinished(rm)
			r.SettleLoaded()
			s = r
		}
		s.Idem.expire(100, 10)
		rm.apply(s.Idem.drainRecordWrites())
		if rows := rm.rows(); len(rows) != 0 {
			t.Fatalf("restored %v: %d rows stay after every recording expired", restore, len(rows))
		}
	}
}

// streamsReadModel is a read model in memory beside a stream index: the
// first seq of each stream.
type streamsReadModel struct {
	memReadModel
	starts map[string]uint64
}

func (m streamsReadModel) StreamStart(stream string) (uint64, error) { return m.starts[stream], nil }

// TestSettledTaskDocumentsAreKeyedByCreationSeq: a settled task is read by
// its id through its stream's first seq (its creation seq), which keys
// its document; an id the log does not have, or a task whose document is
// absent, reads as no task, and a document filed under another task's
// creation seq is refused as corrupt, never answered as the other task.
func TestSettledTaskDocumentsAreKeyedByCreationSeq(t *testing.T) {
	a := &Task{ID: "c3ad6e54-c56b-4016-8000-0000000000a1", CreateSeq: 7, State: StateSucceeded}
	b := &Task{ID: "c3ad6e54-c56b-4016-8000-0000000000b2", CreateSeq: 9, State: StateCanceled}
	rm := streamsReadModel{memReadModel: memReadModel{}, starts: map[string]uint64{}}
	for _, task := range []*Task{a, b} {
		ws, err := TaskWrites(task)
		if err != nil {
			t.Fatal(err)
		}
		rm.apply(ws)
		rm.starts[events.TaskStream(task.ID)] = task.CreateSeq
	}
	for _, task := range []*Task{a, b} {
		got, err := settledTask(rm, task.ID)
		if err != nil || got == nil || got.ID != task.ID || got.CreateSeq != task.CreateSeq {
			t.Fatalf("task %s read as %+v (%v)", task.ID, got, err)
		}
	}
	if got, err := settledTask(rm, "c3ad6e54-c56b-4016-8000-0000000000c3"); got != nil || err != nil {
		t.Fatalf("an id the log does not have read as %+v (%v), want none", got, err)
	}
	rm.starts[events.TaskStream("c3ad6e54-c56b-4016-8000-0000000000d4")] = 11 // created, not settled
	if got, err := settledTask(rm, "c3ad6e54-c56b-4016-8000-0000000000d4"); got != nil || err != nil {
		t.Fatalf("a task without a document read as %+v (%v), want none", got, err)
	}
	rm.memReadModel[RMTasks+"\x00"+string(u64key(a.CreateSeq))] = rm.memReadModel[RMTasks+"\x00"+string(u64key(b.CreateSeq))]
	if got, err := settledTask(rm, a.ID); got != nil || !errors.Is(err, ledger.ErrCorrupt) {
		t.Fatalf("a's creation seq holding b's document read as %+v (%v), want ErrCorrupt", got, err)
	}
}

// TestRecordRowsEncodedOffTheCallerKeepTheirOrder: rows are encoded by
// goroutines, a chunk at a time, while puts go on; a drain gives every
// write in the order made, each put's value what a lone encoder writes,
// also for a record put and expired since the last drain (its delete
// after its put), and the bucket holds what a replay computes.
func TestRecordRowsEncodedOffTheCallerKeepTheirOrder(t *testing.T) {
	const retention = 5
	cfg := Config{IdempotencyRetentionMs: retention}
	live := New(cfg)
	live.Idem.recordsOnDisk()
	replay := New(cfg)
	replay.Idem.rows = map[uint64]*IdemRecord{}
	rm := memReadModel{}
	recs := map[uint64]*IdemRecord{}
	at := int64(0)
	drains, expiredInWindow := 0, 0
	for step := range 1000 {
		at += int64(step % 2)
		seq := uint64(step + 1)
		for _, s := range []*State{live, replay} {
			r := &IdemRecord{Scope: "device:d:op", Key: fmt.Sprint("k", step), At: at, Seq: seq, Outcome: OutcomeAccepted,
				TaskID: fmt.Sprint("task-", step), Fingerprint: []byte{byte(step)}, Reply: &Reply{State: "RUNNING", Version: seq}}
			s.Idem.put(r)
			s.Head = ledger.Head{Seq: seq, Hash: bytes.Repeat([]byte{1}, ledger.HashSize), At: at}
			s.Idem.expire(at, retention)
			if s == live {
				recs[seq] = r
			}
		}
		if step%(3*rowChunkSize+5) != 0 { // several chunks and a remainder per drain
			continue
		}
		drains++
		ws := live.Idem.drainRecordWrites()
		put := map[string]bool{}
		for i, w := range ws {
			if w.Bucket != RMRecords {
				continue
			}
			if w.Value == nil {
				if put[string(w.Key)] {
					expiredInWindow++
				}
				continue
			}
			put[string(w.Key)] = true
			r := recs[binary.BigEndian.Uint64(w.Key)]
			if want := recordRow(r); !bytes.Equal(w.Value, want.Value) {
				t.Fatalf("step %d: write %d (seq %d) holds %x, want %x", step, i, r.Seq, w.Value, want.Value)
			}
		}
		rm.apply(ws)
		want := map[string]string{}
		for seq, r := range replay.Idem.rows {
			want[string(u64key(seq))] = string(recordRow(r).Value)
		}
		if got := rm.rows(); len(want) == 0 || !maps.Equal(got, want) {
			t.Fatalf("step %d: the bucket holds %d rows, a replay %d", step, len(got), len(want))
		}
	}
	if drains < 5 || expiredInWindow == 0 {
		t.Fatalf("%d drains, %d records put and expired between two: the test did not cover both", drains, expiredInWindow)
	}
}
