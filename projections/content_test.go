package projections

import (
	"bytes"
	"errors"
	"fmt"
	"reflect"
	"testing"

	"taskledger/events"
	"taskledger/internal/testfill"
	"taskledger/ledger"
)

// contentState is a state that uses every field and every path of the
// content encoding: fully populated and empty tasks, an authorization of
// another payload and one of the task's own, replies of their record's
// task and of another, tombstones, and an idempotency order that names a
// record twice, names an id without a record and misses a record.
func contentState(t testing.TB) *State {
	t.Helper()
	f := &testfill.Filler{}
	s := New(Config{IdempotencyRetentionMs: 1000})
	s.Head = ledger.Head{Seq: 99, Hash: bytes.Repeat([]byte{7}, ledger.HashSize), At: 1_800_000_000_000}
	s.ServerClaims = 5
	full := testfill.Filled[Task](f)
	same := testfill.Filled[Task](f)
	same.Auth.PayloadSHA256 = same.PayloadSHA256
	same.CreateSeq = full.CreateSeq + 1
	bare := &Task{ID: "bare", CreateSeq: same.CreateSeq + 1, CreatedAt: -5}
	tie := &Task{ID: "bare2", CreateSeq: bare.CreateSeq}
	for _, task := range []*Task{full, same, bare, tie} {
		s.Tasks[task.ID] = task
		s.taskOrder = append(s.taskOrder, task)
	}
	for range 2 {
		d := testfill.Filled[Device](f)
		s.Devices[d.ID] = d
	}
	s.Devices["no-checks"] = &Device{ID: "no-checks", RequiredChecks: []string{}}
	for range 2 {
		a := testfill.Filled[AdminToken](f)
		s.AdminTokens[a.Name] = a
	}
	s.AdminTokens["outside"] = &AdminToken{Name: "outside", Status: AdminTokenRevoked, RevokedAt: 7, StreamVersion: 1}
	var ids []string
	for i := range 4 {
		r := testfill.Filled[IdemRecord](f)
		r.Scope, r.Key = fmt.Sprintf("device:d%d:op", i), fmt.Sprintf("k%d", i)
		switch i {
		case 1:
			r.Reply.TaskID = r.TaskID
		case 2:
			r.Reply = nil
			r.Fingerprint = []byte{}
		case 3: // ids as a node writes them: UUIDs, and one nearly so
			r.Key, r.TaskID = "0b8d3f5e-2c1a-4e6b-9f00-1a2b3c4d5e6f", "c3ad6e54-c56b-4016-8000-00000002d9c7"
			r.Reply.TaskID = "c3ad6e54-c56b-4016-8000-00000002d9c8"
			r.Reply.ExecutionID, r.Reply.SessionID = "ffffffff-ffff-4fff-bfff-ffffffffffff", "00000000-0000-0000-0000-000000000000"
			r.Reply.AuthorizationID, r.Reply.Nonce = "C3AD6E54-C56B-4016-8000-00000002D9C7", "c3ad6e54-c56b-4016-8000-00000002d9c"
			r.Reply.Evidence.ID, r.Reply.Evidence.ExecutionID = "c3ad6e54-c56b-4016-8000-0000000000aa", "c3ad6e54xc56b-4016-8000-0000000000aa"
		}
		id := IdemID(r.Scope, r.Key)
		s.Idem.Records[id] = r
		ids = append(ids, id)
	}
	rec := func(i int) IdemEntry { return IdemEntry{ID: ids[i], Rec: s.Idem.Records[ids[i]]} }
	s.Idem.Order = []IdemEntry{rec(0), rec(1), {ID: "gone\x00key"}, rec(1), rec(2), rec(3)}
	for i := range 3 {
		s.Idem.tombstone(fmt.Sprint("tomb", i))
	}
	return s
}

// exported is what the content must carry: every exported field of the
// state (indexes and soft state aside), and the tombstones' filter.
func exported(s *State) map[string]any {
	tombs := string(must(s.Idem.filter.encode(false))) // the tombstones themselves are on disk
	if s.cfg.KeepSettled {
		tombs += fmt.Sprint(len(s.Idem.Tombstones))
	}
	tasks := map[string]Task{}
	for id, t := range s.Tasks {
		c := *t
		c.queueEpoch, c.pos, c.unendedAt = 0, 0, 0
		tasks[id] = c
	}
	return map[string]any{"head": s.Head, "claims": s.ServerClaims, "tasks": tasks, "devices": s.Devices,
		"admins": s.AdminTokens, "records": must(s.Idem.allRecords()), "order": s.Idem.fullOrder(), "tombstones": tombs}
}

// TestContentRoundTrip: Restore(Canonical(s)) has every field of s, and
// encodes to the same bytes again.
func TestContentRoundTrip(t *testing.T) {
	s := contentState(t)
	b, err := s.Canonical()
	if err != nil {
		t.Fatal(err)
	}
	r, err := Restore(b, s.Config())
	if err != nil {
		t.Fatal(err)
	}
	want, got := exported(s), exported(r)
	for k := range want {
		if !reflect.DeepEqual(want[k], got[k]) {
			t.Errorf("%s differs after a round trip:\nwant %#v\ngot  %#v", k, want[k], got[k])
		}
	}
	again, err := r.Canonical()
	if err != nil || !bytes.Equal(again, b) {
		t.Fatalf("re-encoding differs (%v)", err)
	}
	var order []string
	r.TaskIDsNewestFirst(0, func(t *Task) bool { order = append(order, t.ID); return true })
	if fmt.Sprint(order) != fmt.Sprint([]string{"bare2", "bare", s.taskOrder[1].ID, s.taskOrder[0].ID}) {
		t.Errorf("creation order after restore: %v", order)
	}
}

// memFinished is a read model in memory.
type memFinished map[string]string

func (m memFinished) ReadModelGet(bucket string, key []byte) ([]byte, error) {
	if v, ok := m[bucket+"\x00"+string(key)]; ok {
		return []byte(v), nil
	}
	return nil, nil
}

func (m memFinished) ReadModelScan(string, []byte, []byte, bool, func(k, v []byte) (bool, error)) error {
	return nil
}

func (m memFinished) StreamStart(string) (uint64, error) {
	return 0, errors.New("memFinished: no stream index")
}

// TestRestoredTombstonesFoundThroughTheFilter: a snapshot carries the
// tombstones' filter, not the tombstones (they are in the read model): a
// restored state finds every expired key through the filter and the read
// model, and none that did not expire; one that keeps settled state
// carries them. A restored state that gains tombstones encodes like the
// live state that gained the same ones.
func TestRestoredTombstonesFoundThroughTheFilter(t *testing.T) {
	for _, keep := range []bool{false, true} {
		live := New(Config{IdempotencyRetentionMs: 1000, KeepSettled: keep})
		for i := range 50 {
			live.Idem.tombstone(IdemID("scope", fmt.Sprint(i)))
		}
		disk := memFinished{}
		if !keep { // what the batches wrote
			ws, err := live.TakeReadModel()
			if err != nil {
				t.Fatal(err)
			}
			for _, w := range ws {
				disk[w.Bucket+"\x00"+string(w.Key)] = string(w.Value)
			}
		}
		b, err := live.Canonical()
		if err != nil {
			t.Fatal(err)
		}
		r, err := Restore(b, live.Config())
		if err != nil {
			t.Fatal(err)
		}
		if keep != (len(r.Idem.Tombstones) == 50) {
			t.Fatalf("keep %v: %d tombstones restored in memory", keep, len(r.Idem.Tombstones))
		}
		if !keep {
			r.UseFinished(disk)
		}
		for i := range 2000 {
			_, expired := r.Idem.Lookup("scope", fmt.Sprint(i), 0, 1000)
			if expired != (i < 50) {
				t.Fatalf("keep %v: key %d: expired %v", keep, i, expired)
			}
		}
		for _, s := range []*State{live, r} {
			for _, k := range []string{"7", "new-a", "new-b"} {
				s.Idem.tombstone(IdemID("scope", k))
			}
		}
		lb, _ := live.Canonical()
		rb, _ := r.Canonical()
		if !bytes.Equal(lb, rb) {
			t.Fatalf("keep %v: a restored state with new tombstones encodes unlike the live one", keep)
		}
	}
}

// TestContentRefusesDamage: every truncation, and bytes that are not
// content, fail with ErrCorrupt; none panics.
func TestContentRefusesDamage(t *testing.T) {
	b, err := contentState(t).Canonical()
	if err != nil {
		t.Fatal(err)
	}
	for n := 0; n < len(b); n++ {
		if _, err := Restore(b[:n], Config{}); !errors.Is(err, ledger.ErrCorrupt) {
			t.Fatalf("truncated at %d of %d: %v", n, len(b), err)
		}
	}
	if _, err := Restore(append(append([]byte(nil), b...), 0), Config{}); !errors.Is(err, ledger.ErrCorrupt) {
		t.Fatalf("trailing byte: %v", err)
	}
	if _, err := Restore([]byte{0x87, 0xa4}, Config{}); !errors.Is(err, ledger.ErrCorrupt) {
		t.Fatalf("msgpack: %v", err)
	}
}

// FuzzRestore: arbitrary bytes after the magic never panic, and what
// restores re-encodes to bytes that restore to the same projections.
func FuzzRestore(f *testing.F) {
	for _, s := range []*State{New(Config{}), contentState(f)} {
		b, _ := s.Canonical()
		f.Add(b)
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		st, err := Restore(data, Config{})
		if err != nil {
			return
		}
		again, err := st.Canonical()
		if err != nil {
			return // a state the encoder refuses (e.g. an id not its record's)
		}
		st2, err := Restore(again, Config{})
		if err != nil {
			t.Fatalf("re-encoded content does not restore: %v", err)
		}
		third, _ := st2.Canonical()
		if !bytes.Equal(third, again) {
			t.Fatal("canonical bytes are not stable")
		}
	})
}

// TestContentLoadedRecordsExpire: records a restore leaves encoded expire,
// are found and tombstone exactly like the live records they came from,
// including a record put again after the load under a loaded id, and the
// canonical bytes stay equal at every step.
func TestContentLoadedRecordsExpire(t *testing.T) {
	const retention = 100
	live := New(Config{IdempotencyRetentionMs: retention})
	var keys []string
	for i := range 40 {
		k := fmt.Sprint("k", i)
		keys = append(keys, k)
		r := &IdemRecord{Scope: "device:d:op", Key: k, Fingerprint: []byte{byte(i)}, At: int64(10 * i), Seq: uint64(i + 1),
			EventType: string(events.EvTaskStarted), Outcome: OutcomeAccepted, TaskID: "t", DeviceID: "d",
			Reply: &Reply{TaskID: "t", State: string(StateRunning), ServerTime: int64(10 * i), LeaseExpiresAt: int64(10*i + 50)}}
		live.Idem.put(r)
	}
	live.Idem.Order = append(live.Idem.Order, IdemEntry{ID: "gone\x00key"}) // an id without a record
	b, err := live.Canonical()
	if err != nil {
		t.Fatal(err)
	}
	restored, err := Restore(b, live.Config())
	if err != nil {
		t.Fatal(err)
	}
	if len(restored.Idem.Records) != 0 || restored.Idem.loaded == nil {
		t.Fatal("a restore decoded the records instead of leaving them encoded")
	}
	again := &IdemRecord{Scope: "device:d:op", Key: "k25", Fingerprint: []byte{99}, At: 395, Seq: 99, EventType: string(events.EvTaskStarted), Outcome: OutcomeAccepted}
	for _, s := range []*State{live, restored} {
		c := *again
		s.Idem.put(&c)
	}
	for now := int64(0); now <= 600; now += 7 {
		for _, s := range []*State{live, restored} {
			s.Idem.expire(now, retention)
		}
		lb, _ := live.Canonical()
		rb, _ := restored.Canonical()
		if !bytes.Equal(lb, rb) {
			t.Fatalf("at %d the restored records encode unlike the live ones", now)
		}
		for _, k := range append(keys, "missing") {
			lr, le := live.Idem.Lookup("device:d:op", k, now, retention)
			rr, re := restored.Idem.Lookup("device:d:op", k, now, retention)
			if le != re || !reflect.DeepEqual(lr, rr) {
				t.Fatalf("at %d key %s: live %+v %v, restored %+v %v", now, k, lr, le, rr, re)
			}
		}
	}
}

// TestContentRestoredClaimQueue: a restored state picks the same task to
// claim as the live one at every moment, while claims are taken, expire
// and return to the queue, and epochs given after the restore never
// collide with restored ones.
func TestContentRestoredClaimQueue(t *testing.T) {
	live := New(Config{})
	live.Head = ledger.Head{Seq: 200, Hash: make([]byte, ledger.HashSize), At: 1000}
	for i := range 60 {
		task := &Task{ID: fmt.Sprintf("t%02d", i), CreateSeq: uint64(i + 1), CreatedAt: int64(10 * (i / 3)), State: StatePending,
			Version: 1, Revision: 1, PayloadSHA256: "p", Auth: &Authorization{AuthBody: events.AuthBody{ID: "a", Revision: 1,
				PayloadSHA256: "p", ExpiresAt: 5000}, Status: AuthActive}}
		switch i % 5 {
		case 1: // claimed, lease expiring at different times
			task.State, task.Generation = StateClaimed, 1
			task.Claim = &Claim{Generation: 1, DeviceID: "d", LeaseExpiresAt: int64(1000 + 37*i)}
		case 2:
			task.State = StateSucceeded
		case 3:
			task.Auth.Status = AuthConsumed
		}
		live.Tasks[task.ID] = task
		live.taskOrder = append(live.taskOrder, task)
		live.reindex(task)
	}
	b, err := live.Canonical()
	if err != nil {
		t.Fatal(err)
	}
	restored, err := Restore(b, live.Config())
	if err != nil {
		t.Fatal(err)
	}
	claim := func(s *State, id string, now int64) {
		task := s.Tasks[id]
		task.State, task.Generation = StateClaimed, task.Generation+1
		task.Claim = &Claim{Generation: task.Generation, DeviceID: "d", LeaseExpiresAt: now + 300}
		s.reindex(task)
	}
	for now := int64(1000); now < 4000; now += 50 {
		for {
			a, b := live.NextClaimable(now), restored.NextClaimable(now)
			if (a == nil) != (b == nil) || (a != nil && a.ID != b.ID) {
				t.Fatalf("at %d: live picks %v, restored %v", now, a, b)
			}
			if a == nil {
				break
			}
			claim(live, a.ID, now)
			claim(restored, b.ID, now)
		}
	}
}
