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

// The read-model writes taken batch by batch add up to the read model a
// full replay gives, whatever the batches: settling is a function of the
// log's head, not of when the sequencer asked. Every document decodes to
// the task the projections hold.
func TestReadModelWritesDoNotDependOnBatching(t *testing.T) {
	evs := fixtureEvents(t)
	span := evs[len(evs)-1].At - evs[0].At
	cfg := projections.Config{IdempotencyRetentionMs: span / 4} // some tasks settle, some not
	full := projections.New(cfg)
	for _, e := range evs {
		if err := full.Apply(e); err != nil {
			t.Fatal(err)
		}
	}
	want, err := full.ReadModelWrites()
	if err != nil {
		t.Fatal(err)
	}
	docs := 0
	for _, w := range want {
		if w.Bucket != projections.RMTasks {
			continue
		}
		docs++
		task, err := projections.DecodeFinishedTask(w.Value)
		if err != nil {
			t.Fatal(err)
		}
		live := full.Tasks[string(w.Key)]
		if task.ID != live.ID || task.State != live.State || task.UpdatedAt != live.UpdatedAt ||
			task.Version != live.Version || task.Payload != live.Payload || !full.Settled(live) {
			t.Fatalf("document of %s decodes to %+v, the projections hold %+v", w.Key, task, live)
		}
	}
	if docs == 0 || docs == len(full.Tasks) {
		t.Fatalf("%d of %d tasks settled: the retention settles none or all", docs, len(full.Tasks))
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
		for _, w := range want {
			if w.Bucket == projections.RMMeta && bytes.Equal(w.Key, projections.RMVersionKey()) {
				continue // written by a rebuild only
			}
			if v, ok := got[w.Bucket+"\x00"+string(w.Key)]; !ok || v != string(w.Value) {
				t.Fatalf("batches of %d: %s %q missing or different", every, w.Bucket, w.Key)
			}
			delete(got, w.Bucket+"\x00"+string(w.Key))
		}
		if len(got) != 0 {
			t.Fatalf("batches of %d wrote %d entries a full replay does not have", every, len(got))
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
	if len(ws) != 1 || ws[0].Bucket != projections.RMMeta {
		t.Fatalf("without retention %d writes, want the head only", len(ws))
	}
}
