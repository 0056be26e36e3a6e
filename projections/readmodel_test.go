package projections_test

import (
	"bytes"
	"testing"

	"taskledger/ledger"
	"taskledger/projections"
)

// fixtureEvents reads every event of the v1 fixture log.
func fixtureEvents(t *testing.T) []*ledger.Event {
	t.Helper()
	store, err := ledger.Open(copyFixture(t), ledger.Options{ReadOnly: true})
	if err != nil {
		t.Fatal(err)
	}
	defer store.Close()
	var evs []*ledger.Event
	if err := store.Range(0, func(e *ledger.Event) error { evs = append(evs, e); return nil }); err != nil {
		t.Fatal(err)
	}
	return evs
}

// The read-model writes taken batch by batch add up to what a replay that
// settles every task writes, whatever the batches: settling is a function
// of the log's head, not of when the sequencer asked. A settled task
// leaves the projections' map; every document decodes to the task as it
// was when it settled.
func TestReadModelWritesDoNotDependOnBatching(t *testing.T) {
	dir := copyFixture(t)
	store, err := ledger.Open(dir, ledger.Options{ReadOnly: true})
	if err != nil {
		t.Fatal(err)
	}
	defer store.Close()
	var evs []*ledger.Event
	if err := store.Range(0, func(e *ledger.Event) error { evs = append(evs, e); return nil }); err != nil {
		t.Fatal(err)
	}
	span := evs[len(evs)-1].At - evs[0].At
	cfg := projections.Config{IdempotencyRetentionMs: span / 4} // some tasks settle, some not
	want := map[string]string{}
	settled := map[string]*projections.Task{}
	full, err := projections.RebuildSettling(store, cfg, func(task *projections.Task) error {
		settled[task.ID] = task
		ws, err := projections.TaskWrites(task)
		for _, w := range ws {
			want[w.Bucket+"\x00"+string(w.Key)] = string(w.Value)
		}
		return err
	}, func(tomb string) error {
		w := projections.TombWrite(tomb)
		want[w.Bucket+"\x00"+string(w.Key)] = string(w.Value)
		return nil
	}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if len(settled) == 0 || len(full.Tasks) == 0 {
		t.Fatalf("%d tasks settled, %d live: the retention settles none or all", len(settled), len(full.Tasks))
	}
	for id, task := range settled {
		if full.Tasks[id] != nil || !full.Settled(task) {
			t.Fatalf("settled task %s is still in the projections", id)
		}
		ws, _ := projections.TaskWrites(task)
		doc, err := projections.DecodeFinishedTask(ws[0].Value)
		if err != nil {
			t.Fatal(err)
		}
		again, _ := projections.TaskWrites(doc)
		if !bytes.Equal(again[0].Value, ws[0].Value) || doc.ID != id || doc.State != task.State {
			t.Fatalf("document of %s does not decode to the task", id)
		}
	}
	for _, w := range full.ReadModelMeta() {
		if !bytes.Equal(w.Key, projections.RMVersionKey()) {
			want[w.Bucket+"\x00"+string(w.Key)] = string(w.Value)
		}
	}
	for _, every := range []int{1, 3, 7, len(evs)} {
		s := projections.New(cfg)
		got := map[string]string{}
		for i, e := range evs {
			if err := s.Apply(e); err != nil {
				t.Fatal(err)
			}
			if (i+1)%every == 0 || i == len(evs)-1 {
				ws, err := s.TakeReadModel()
				if err != nil {
					t.Fatal(err)
				}
				for _, w := range ws {
					got[w.Bucket+"\x00"+string(w.Key)] = string(w.Value)
				}
			}
		}
		for k, v := range want {
			if got[k] != v {
				t.Fatalf("batches of %d: %q missing or different", every, k)
			}
			delete(got, k)
		}
		if len(got) != 0 {
			t.Fatalf("batches of %d wrote %d entries a full replay does not have", every, len(got))
		}
		if s.StateCounts()[string(projections.StateCanceled)] != full.StateCounts()[string(projections.StateCanceled)] {
			t.Fatalf("batches of %d: counts %v, full replay %v", every, s.StateCounts(), full.StateCounts())
		}
	}
}

// With no retention records never expire, so no task settles.
func TestNothingSettlesWithoutRetention(t *testing.T) {
	s := projections.New(projections.Config{})
	for _, e := range fixtureEvents(t) {
		if err := s.Apply(e); err != nil {
			t.Fatal(err)
		}
	}
	ws, err := s.TakeReadModel()
	if err != nil {
		t.Fatal(err)
	}
	if len(ws) != 2 || ws[0].Bucket != projections.RMMeta || ws[1].Bucket != projections.RMMeta {
		t.Fatalf("without retention %d writes, want the head and counts only", len(ws))
	}
}

// A capture is a point in time though tasks settle after it: the creation
// order it shares is not holed under it (a settled task's hole is made in
// a copy), so it encodes the projections as they were when taken.
func TestCaptureKeepsTasksThatSettleAfterIt(t *testing.T) {
	evs := fixtureEvents(t)
	span := evs[len(evs)-1].At - evs[0].At
	cfg := projections.Config{IdempotencyRetentionMs: span / 4}
	for cut := 1; cut < len(evs); cut += 5 {
		s, at := projections.New(cfg), projections.New(cfg)
		for _, e := range evs[:cut] {
			if err := s.Apply(e); err != nil {
				t.Fatal(err)
			}
			if err := at.Apply(e); err != nil {
				t.Fatal(err)
			}
		}
		c := s.Capture()
		before := len(s.Tasks)
		for _, e := range evs[cut:] {
			if err := s.Apply(e); err != nil {
				t.Fatal(err)
			}
		}
		got, err := c.Encode()
		if err != nil {
			t.Fatal(err)
		}
		want, _ := at.Canonical()
		if !bytes.Equal(got, want) {
			t.Fatalf("capture at event %d (%d tasks, %d after) encodes unlike the projections then", cut, before, len(s.Tasks))
		}
	}
}
