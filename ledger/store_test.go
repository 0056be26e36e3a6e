package ledger

import (
	"errors"
	"testing"
)

func mustOpen(t *testing.T, dir string) *Store {
	t.Helper()
	s, err := Open(dir, Options{})
	if err != nil {
		t.Fatalf("open: %v", err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

// sealed builds n events continuing head on one stream.
func sealed(t *testing.T, head Head, n int, stream string, firstVersion uint64) ([]*Event, Head) {
	t.Helper()
	var out []*Event
	for i := 0; i < n; i++ {
		body, _ := Marshal(map[string]any{"i": i})
		e := &Event{Stream: stream, StreamVersion: firstVersion + uint64(i), Type: "test.event", Schema: 1,
			At: head.At + 1, Actor: Actor{Kind: ActorSystem, ID: "taskledger"}, Body: body}
		var err error
		if head, err = Seal(e, head); err != nil {
			t.Fatal(err)
		}
		out = append(out, e)
	}
	return out, head
}

func TestAppendRangeStream(t *testing.T) {
	s := mustOpen(t, t.TempDir())
	evs, head := sealed(t, GenesisHead(), 3, "a", 1)
	if err := s.Append(&Batch{Expected: GenesisHead(), Events: evs}); err != nil {
		t.Fatal(err)
	}
	more, head2 := sealed(t, head, 2, "b", 1)
	if err := s.Append(&Batch{Expected: head, Events: more}); err != nil {
		t.Fatal(err)
	}
	got, err := s.Head()
	if err != nil || got.Seq != 5 || string(got.Hash) != string(head2.Hash) {
		t.Fatalf("head %+v %v", got, err)
	}
	var seqs []uint64
	if err := s.Range(2, func(e *Event) error { seqs = append(seqs, e.Seq); return nil }); err != nil {
		t.Fatal(err)
	}
	if len(seqs) != 3 || seqs[0] != 3 || seqs[2] != 5 {
		t.Fatalf("range after 2: %v", seqs)
	}
	var streamSeqs []uint64
	if err := s.Stream("b", func(e *Event) error { streamSeqs = append(streamSeqs, e.Seq); return nil }); err != nil {
		t.Fatal(err)
	}
	if len(streamSeqs) != 2 || streamSeqs[0] != 4 {
		t.Fatalf("stream b: %v", streamSeqs)
	}
	// A stream whose name is a prefix of another's is not mixed in.
	n := 0
	_ = s.Stream("", func(*Event) error { n++; return nil })
	if n != 0 {
		t.Fatalf("empty stream name matched %d events", n)
	}
	if err := s.Check(); err != nil {
		t.Fatal(err)
	}
}

func TestAppendRefusesMovedHead(t *testing.T) {
	s := mustOpen(t, t.TempDir())
	evs, head := sealed(t, GenesisHead(), 2, "a", 1)
	if err := s.Append(&Batch{Expected: GenesisHead(), Events: evs}); err != nil {
		t.Fatal(err)
	}
	// A batch decided against the old head is refused and writes nothing.
	stale, _ := sealed(t, GenesisHead(), 1, "x", 1)
	if err := s.Append(&Batch{Expected: GenesisHead(), Events: stale}); !errors.Is(err, ErrHeadMoved) {
		t.Fatalf("want ErrHeadMoved, got %v", err)
	}
	// A batch that names the right head but does not continue it is refused.
	gap, _ := sealed(t, Head{Seq: head.Seq + 1, Hash: head.Hash, At: head.At}, 1, "x", 1)
	if err := s.Append(&Batch{Expected: head, Events: gap}); !errors.Is(err, ErrBadBatch) {
		t.Fatalf("want ErrBadBatch, got %v", err)
	}
	got, _ := s.Head()
	if got.Seq != 2 {
		t.Fatalf("head moved to %d after refused appends", got.Seq)
	}
	n := 0
	_ = s.Range(0, func(*Event) error { n++; return nil })
	if n != 2 {
		t.Fatalf("%d events stored, want 2", n)
	}
}

func TestSecondOpenIsRefused(t *testing.T) {
	dir := t.TempDir()
	mustOpen(t, dir)
	if _, err := Open(dir, Options{}); !errors.Is(err, ErrInUse) {
		t.Fatalf("want ErrInUse, got %v", err)
	}
	if _, err := Open(dir, Options{ReadOnly: true}); !errors.Is(err, ErrInUse) {
		t.Fatalf("read-only open while a writer holds the lock: want ErrInUse, got %v", err)
	}
}

func TestHashCoversEveryField(t *testing.T) {
	evs, _ := sealed(t, GenesisHead(), 1, "a", 1)
	e := *evs[0]
	base, _ := ComputeHash(&e)
	mutations := map[string]func(*Event){
		"seq":    func(e *Event) { e.Seq++ },
		"stream": func(e *Event) { e.Stream = "b" },
		"type":   func(e *Event) { e.Type = "other" },
		"at":     func(e *Event) { e.At++ },
		"actor":  func(e *Event) { e.Actor.ID = "x" },
		"body":   func(e *Event) { e.Body = append([]byte(nil), 0xc0) },
		"prev":   func(e *Event) { e.PrevHash = make([]byte, HashSize); e.PrevHash[0] = 1 },
		"idem":   func(e *Event) { e.Idem = &Idem{Scope: "s", Key: "k"} },
	}
	for name, m := range mutations {
		c := e
		m(&c)
		h, _ := ComputeHash(&c)
		if string(h) == string(base) {
			t.Errorf("changing %s does not change the hash", name)
		}
	}
}

func TestSoftRecordsAndMeta(t *testing.T) {
	s := mustOpen(t, t.TempDir())
	err := s.Append(&Batch{Expected: GenesisHead(), Soft: []SoftRecord{{Key: "presence/a", Value: []byte{1}}, {Key: "idem/x", Value: []byte{2}}},
		ManualClock: &ManualClock{Enabled: true, Now: 42}, SecretCheck: []byte{9}})
	if err != nil {
		t.Fatal(err)
	}
	var keys []string
	_ = s.SoftRecords("presence/", func(k string, _ []byte) error { keys = append(keys, k); return nil })
	if len(keys) != 1 || keys[0] != "presence/a" {
		t.Fatalf("soft records: %v", keys)
	}
	mc, _ := s.ManualClock()
	kcv, _ := s.SecretCheck()
	if !mc.Enabled || mc.Now != 42 || len(kcv) != 1 {
		t.Fatalf("meta: %+v %v", mc, kcv)
	}
	if err := s.Append(&Batch{Expected: GenesisHead(), Soft: []SoftRecord{{Key: "presence/a"}}}); err != nil {
		t.Fatal(err)
	}
	keys = nil
	_ = s.SoftRecords("presence/", func(k string, _ []byte) error { keys = append(keys, k); return nil })
	if len(keys) != 0 {
		t.Fatalf("deleted soft record still there: %v", keys)
	}
}
