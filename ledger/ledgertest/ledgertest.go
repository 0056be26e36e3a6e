// Package ledgertest is the conformance suite every ledger.Backend passes:
// the bbolt file and the JetStream stream run the same table of tests, so
// the node can rely on one contract whichever engine holds the log.
package ledgertest

import (
	"bytes"
	"errors"
	"fmt"
	"sync"
	"testing"

	"taskledger/ledger"
)

// Harness tells the suite how to get backends.
type Harness struct {
	// New prepares empty storage for one test and returns how to open it:
	// each call of open gives a backend over the same log (after Close of
	// the previous one, it is a reopen). The suite closes what it opens.
	New func(t *testing.T) (open func() (ledger.Backend, error))
	// Shared, when true, means open may be called while another backend
	// over the same log is open (several writers over a replicated log);
	// the suite then also races appenders on separate backends and checks
	// that a writer whose head is stale is refused.
	Shared bool
}

// Run runs every conformance test against h.
func Run(t *testing.T, h Harness) {
	tests := []struct {
		name string
		fn   func(t *testing.T, h Harness)
		// shared: needs Harness.Shared
		shared bool
	}{
		{"AppendAndReadBack", testAppendAndReadBack, false},
		{"HeadAfterAppend", testHeadAfterAppend, false},
		{"StaleHeadRefusedNothingWritten", testStaleHeadRefused, false},
		{"BatchThatDoesNotChainRefused", testBadBatchRefused, false},
		{"RangeAfterAndStop", testRangeAfterAndStop, false},
		{"StreamsInOrder", testStreamsInOrder, false},
		{"SoftRecords", testSoftRecords, false},
		{"MetaRecords", testMetaRecords, false},
		{"ReopenKeepsEverything", testReopen, false},
		{"ConcurrentAppendersOneWins", testConcurrentOneWins, false},
		{"ConcurrentWritersOneWins", testConcurrentWritersOneWins, true},
		{"StaleWriterRefused", testStaleWriterRefused, true},
	}
	for _, tc := range tests {
		if tc.shared && !h.Shared {
			continue // a single-writer engine (a locked file) has no second writer to race
		}
		t.Run(tc.name, func(t *testing.T) { tc.fn(t, h) })
	}
}

// MustOpen opens a backend and closes it at cleanup (a second Close by
// the test is allowed to fail quietly).
func MustOpen(t *testing.T, open func() (ledger.Backend, error)) ledger.Backend {
	t.Helper()
	b, err := open()
	if err != nil {
		t.Fatalf("open: %v", err)
	}
	t.Cleanup(func() { _ = b.Close() })
	return b
}

// Events seals n events continuing head, spread over the given streams
// (round robin, stream versions counted from versions, which it updates).
func Events(t testing.TB, head ledger.Head, n int, versions map[string]uint64, streams ...string) ([]*ledger.Event, ledger.Head) {
	t.Helper()
	if len(streams) == 0 {
		streams = []string{"task/a"}
	}
	out := make([]*ledger.Event, 0, n)
	for i := 0; i < n; i++ {
		stream := streams[i%len(streams)]
		versions[stream]++
		body, err := ledger.Marshal(map[string]any{"n": head.Seq + 1, "stream": stream})
		if err != nil {
			t.Fatal(err)
		}
		e := &ledger.Event{Stream: stream, StreamVersion: versions[stream], Type: "test.event", Schema: 1,
			At: 1_700_000_000_000 + int64(head.Seq), Actor: ledger.Actor{Kind: ledger.ActorSystem, ID: "test"},
			Idem: &ledger.Idem{Scope: "system/test", Key: fmt.Sprintf("k%d", head.Seq+1), Fingerprint: []byte{1, 2, 3}},
			Body: body}
		if head, err = ledger.Seal(e, head); err != nil {
			t.Fatal(err)
		}
		out = append(out, e)
	}
	return out, head
}

// all reads the whole log through Range and RangeRaw and checks they agree.
func all(t *testing.T, b ledger.Backend) []*ledger.Event {
	t.Helper()
	var evs []*ledger.Event
	if err := b.Range(0, func(e *ledger.Event) error {
		c := *e
		evs = append(evs, &c)
		return nil
	}); err != nil {
		t.Fatalf("Range: %v", err)
	}
	i := 0
	if err := b.RangeRaw(0, func(seq uint64, raw []byte) error {
		if i >= len(evs) || evs[i].Seq != seq {
			return fmt.Errorf("RangeRaw gave seq %d at position %d", seq, i)
		}
		want, err := ledger.Marshal(evs[i])
		if err != nil {
			return err
		}
		if !bytes.Equal(raw, want) {
			return fmt.Errorf("seq %d: stored bytes are not the envelope's encoding", seq)
		}
		i++
		return nil
	}); err != nil {
		t.Fatalf("RangeRaw: %v", err)
	}
	if i != len(evs) {
		t.Fatalf("RangeRaw gave %d events, Range %d", i, len(evs))
	}
	return evs
}

func sameEvents(t *testing.T, got []*ledger.Event, want []*ledger.Event) {
	t.Helper()
	if len(got) != len(want) {
		t.Fatalf("read %d events, want %d", len(got), len(want))
	}
	for i := range want {
		g, _ := ledger.Marshal(got[i])
		w, _ := ledger.Marshal(want[i])
		if !bytes.Equal(g, w) {
			t.Fatalf("event %d (seq %d) reads back different", i, want[i].Seq)
		}
		if h, err := ledger.ComputeHash(got[i]); err != nil || !bytes.Equal(h, got[i].Hash) {
			t.Fatalf("seq %d: hash does not verify after read back", got[i].Seq)
		}
	}
}

func mustHead(t *testing.T, b ledger.Backend) ledger.Head {
	t.Helper()
	h, err := b.Head()
	if err != nil {
		t.Fatalf("Head: %v", err)
	}
	return h
}

func sameHead(t *testing.T, got, want ledger.Head) {
	t.Helper()
	if got.Seq != want.Seq || !bytes.Equal(got.Hash, want.Hash) || got.At != want.At {
		t.Fatalf("head is (%d, %x, %d), want (%d, %x, %d)", got.Seq, got.Hash, got.At, want.Seq, want.Hash, want.At)
	}
}

func testAppendAndReadBack(t *testing.T, h Harness) {
	b := MustOpen(t, h.New(t))
	v := map[string]uint64{}
	first, head := Events(t, ledger.GenesisHead(), 3, v, "task/a", "task/b")
	if err := b.Append(&ledger.Batch{Expected: ledger.GenesisHead(), Events: first}); err != nil {
		t.Fatalf("first batch: %v", err)
	}
	second, _ := Events(t, head, 2, v, "task/a")
	// The second batch carries its stored encodings, as the sequencer's do.
	enc := make([][]byte, len(second))
	for i, e := range second {
		enc[i], _ = ledger.Marshal(e)
	}
	if err := b.Append(&ledger.Batch{Expected: head, Events: second, Encoded: enc}); err != nil {
		t.Fatalf("second batch: %v", err)
	}
	sameEvents(t, all(t, b), append(first, second...))
}

func testHeadAfterAppend(t *testing.T, h Harness) {
	b := MustOpen(t, h.New(t))
	sameHead(t, mustHead(t, b), ledger.GenesisHead())
	evs, head := Events(t, ledger.GenesisHead(), 4, map[string]uint64{})
	if err := b.Append(&ledger.Batch{Expected: ledger.GenesisHead(), Events: evs}); err != nil {
		t.Fatal(err)
	}
	sameHead(t, mustHead(t, b), head)
	// A batch without events (soft records, meta) leaves the head alone.
	if err := b.Append(&ledger.Batch{Expected: head, Soft: []ledger.SoftRecord{{Key: "presence/x", Value: []byte{1}}}}); err != nil {
		t.Fatal(err)
	}
	sameHead(t, mustHead(t, b), head)
}

func testStaleHeadRefused(t *testing.T, h Harness) {
	b := MustOpen(t, h.New(t))
	v := map[string]uint64{}
	evs, head := Events(t, ledger.GenesisHead(), 2, v)
	if err := b.Append(&ledger.Batch{Expected: ledger.GenesisHead(), Events: evs}); err != nil {
		t.Fatal(err)
	}
	// Decided against the genesis again: another writer's view.
	stale, _ := Events(t, ledger.GenesisHead(), 1, map[string]uint64{})
	err := b.Append(&ledger.Batch{Expected: ledger.GenesisHead(), Events: stale,
		Soft: []ledger.SoftRecord{{Key: "stale/1", Value: []byte("x")}}, SecretCheck: []byte("stale")})
	if !errors.Is(err, ledger.ErrHeadMoved) {
		t.Fatalf("stale batch: %v, want ErrHeadMoved", err)
	}
	// Same seq as the head, other hash: refused too.
	wrong := head
	wrong.Hash = bytes.Repeat([]byte{7}, ledger.HashSize)
	more, _ := Events(t, wrong, 1, map[string]uint64{})
	if err := b.Append(&ledger.Batch{Expected: wrong, Events: more}); !errors.Is(err, ledger.ErrHeadMoved) {
		t.Fatalf("batch at a head of another hash: %v, want ErrHeadMoved", err)
	}
	// A batch of soft records and meta alone is checked too.
	err = b.Append(&ledger.Batch{Expected: ledger.GenesisHead(),
		Soft: []ledger.SoftRecord{{Key: "stale/2", Value: []byte("y")}}, ManualClock: &ledger.ManualClock{Enabled: true, Now: 9}})
	if !errors.Is(err, ledger.ErrHeadMoved) {
		t.Fatalf("stale soft-only batch: %v, want ErrHeadMoved", err)
	}
	if mc, err := b.ManualClock(); err != nil || mc != (ledger.ManualClock{}) {
		t.Fatalf("a refused batch wrote the manual clock: %+v, %v", mc, err)
	}
	sameHead(t, mustHead(t, b), head)
	sameEvents(t, all(t, b), evs)
	n := 0
	if err := b.SoftRecords("stale/", func(string, []byte) error { n++; return nil }); err != nil {
		t.Fatal(err)
	}
	if sc, err := b.SecretCheck(); err != nil || sc != nil || n != 0 {
		t.Fatalf("a refused batch wrote: soft %d, secret check %q (%v)", n, sc, err)
	}
}

func testBadBatchRefused(t *testing.T, h Harness) {
	b := MustOpen(t, h.New(t))
	evs, _ := Events(t, ledger.GenesisHead(), 3, map[string]uint64{})
	evs[2].Seq = 5 // a gap
	if err := b.Append(&ledger.Batch{Expected: ledger.GenesisHead(), Events: evs}); !errors.Is(err, ledger.ErrBadBatch) {
		t.Fatalf("gap: %v, want ErrBadBatch", err)
	}
	evs, _ = Events(t, ledger.GenesisHead(), 2, map[string]uint64{})
	evs[1].PrevHash = bytes.Repeat([]byte{9}, ledger.HashSize)
	if err := b.Append(&ledger.Batch{Expected: ledger.GenesisHead(), Events: evs}); !errors.Is(err, ledger.ErrBadBatch) {
		t.Fatalf("broken chain: %v, want ErrBadBatch", err)
	}
	sameHead(t, mustHead(t, b), ledger.GenesisHead())
	if got := all(t, b); len(got) != 0 {
		t.Fatalf("a refused batch wrote %d events", len(got))
	}
}

func testRangeAfterAndStop(t *testing.T, h Harness) {
	b := MustOpen(t, h.New(t))
	v := map[string]uint64{}
	head := ledger.GenesisHead()
	var want []*ledger.Event
	for i := 0; i < 4; i++ { // several batches: ranges start inside one
		evs, next := Events(t, head, 3, v)
		if err := b.Append(&ledger.Batch{Expected: head, Events: evs}); err != nil {
			t.Fatal(err)
		}
		want, head = append(want, evs...), next
	}
	for _, after := range []uint64{0, 1, 3, 7, 11, 12, 40} {
		var seqs []uint64
		if err := b.Range(after, func(e *ledger.Event) error {
			if e.Seq == 0 || e.Seq > uint64(len(want)) || !bytes.Equal(e.Hash, want[e.Seq-1].Hash) {
				return fmt.Errorf("Range(%d) gave seq %d with another hash", after, e.Seq)
			}
			seqs = append(seqs, e.Seq)
			return nil
		}); err != nil {
			t.Fatal(err)
		}
		wantN := 0
		if after < 12 {
			wantN = 12 - int(after)
		}
		if len(seqs) != wantN || (wantN > 0 && (seqs[0] != after+1 || seqs[len(seqs)-1] != 12)) {
			t.Fatalf("Range(%d) gave %v", after, seqs)
		}
	}
	n := 0
	err := b.RangeRaw(0, func(uint64, []byte) error {
		n++
		if n == 5 {
			return ledger.ErrStop
		}
		return nil
	})
	if err != nil || n != 5 {
		t.Fatalf("ErrStop: %v after %d events", err, n)
	}
	boom := errors.New("boom")
	if err := b.Range(0, func(*ledger.Event) error { return boom }); !errors.Is(err, boom) {
		t.Fatalf("fn's error: %v", err)
	}
}

func testStreamsInOrder(t *testing.T, h Harness) {
	b := MustOpen(t, h.New(t))
	v := map[string]uint64{}
	head := ledger.GenesisHead()
	for i := 0; i < 3; i++ {
		evs, next := Events(t, head, 5, v, "task/a", "task/b", "device/c")
		if err := b.Append(&ledger.Batch{Expected: head, Events: evs}); err != nil {
			t.Fatal(err)
		}
		head = next
	}
	for stream, n := range v {
		var got []uint64
		if err := b.Stream(stream, func(e *ledger.Event) error {
			if e.Stream != stream {
				return fmt.Errorf("stream %s gave an event of %s", stream, e.Stream)
			}
			got = append(got, e.StreamVersion)
			return nil
		}); err != nil {
			t.Fatal(err)
		}
		if uint64(len(got)) != n {
			t.Fatalf("stream %s: %d events, want %d", stream, len(got), n)
		}
		for i, ver := range got {
			if ver != uint64(i+1) {
				t.Fatalf("stream %s out of order: %v", stream, got)
			}
		}
	}
	// A stream's name that prefixes another's is its own stream.
	n := 0
	if err := b.Stream("task/", func(*ledger.Event) error { n++; return nil }); err != nil || n != 0 {
		t.Fatalf("unknown stream: %d events, %v", n, err)
	}
}

func softMap(t *testing.T, b ledger.Backend, prefix string) map[string]string {
	t.Helper()
	out := map[string]string{}
	if err := b.SoftRecords(prefix, func(k string, v []byte) error { out[k] = string(v); return nil }); err != nil {
		t.Fatal(err)
	}
	return out
}

func testSoftRecords(t *testing.T, h Harness) {
	b := MustOpen(t, h.New(t))
	evs, head := Events(t, ledger.GenesisHead(), 1, map[string]uint64{})
	odd := "idem/device:d 1/tasks.start/key with spaces, dots. and ünïcode"
	if err := b.Append(&ledger.Batch{Expected: ledger.GenesisHead(), Events: evs, Soft: []ledger.SoftRecord{
		{Key: "presence/d1", Value: []byte("one")},
		{Key: "presence/d2", Value: []byte("two")},
		{Key: "lease/e1", Value: []byte("lease")},
		{Key: odd, Value: []byte("odd")},
	}}); err != nil {
		t.Fatal(err)
	}
	if got := softMap(t, b, "presence/"); len(got) != 2 || got["presence/d1"] != "one" || got["presence/d2"] != "two" {
		t.Fatalf("presence records: %v", got)
	}
	if got := softMap(t, b, "idem/"); got[odd] != "odd" || len(got) != 1 {
		t.Fatalf("a key with odd characters: %v", got)
	}
	// A soft-only batch replaces and deletes.
	if err := b.Append(&ledger.Batch{Expected: head, Soft: []ledger.SoftRecord{
		{Key: "presence/d1", Value: []byte("uno")}, {Key: "presence/d2"}, {Key: "lease/none"}}}); err != nil {
		t.Fatal(err)
	}
	if got := softMap(t, b, "presence/"); len(got) != 1 || got["presence/d1"] != "uno" {
		t.Fatalf("after replace and delete: %v", got)
	}
	if got := softMap(t, b, ""); len(got) != 3 {
		t.Fatalf("every record: %v", got)
	}
}

func testMetaRecords(t *testing.T, h Harness) {
	b := MustOpen(t, h.New(t))
	if mc, err := b.ManualClock(); err != nil || mc != (ledger.ManualClock{}) {
		t.Fatalf("fresh manual clock: %+v, %v", mc, err)
	}
	if sc, err := b.SecretCheck(); err != nil || sc != nil {
		t.Fatalf("fresh secret check: %q, %v", sc, err)
	}
	if err := b.Append(&ledger.Batch{Expected: ledger.GenesisHead(),
		ManualClock: &ledger.ManualClock{Enabled: true, Now: 42}, SecretCheck: []byte("kcv")}); err != nil {
		t.Fatal(err)
	}
	if mc, err := b.ManualClock(); err != nil || mc != (ledger.ManualClock{Enabled: true, Now: 42}) {
		t.Fatalf("manual clock: %+v, %v", mc, err)
	}
	if sc, err := b.SecretCheck(); err != nil || string(sc) != "kcv" {
		t.Fatalf("secret check: %q, %v", sc, err)
	}
	if err := b.PutAdminToken("initial", []byte("h1")); err != nil {
		t.Fatal(err)
	}
	if err := b.PutAdminToken("ci.bot-2", []byte("h2")); err != nil {
		t.Fatal(err)
	}
	if err := b.PutAdminToken("initial", []byte("h3")); err != nil { // replaces
		t.Fatal(err)
	}
	toks, err := b.AdminTokens()
	if err != nil || len(toks) != 2 || string(toks["initial"]) != "h3" || string(toks["ci.bot-2"]) != "h2" {
		t.Fatalf("admin tokens: %v, %v", toks, err)
	}
	if err := b.DeleteAdminToken("ci.bot-2"); err != nil {
		t.Fatal(err)
	}
	if err := b.DeleteAdminToken("ci.bot-2"); !errors.Is(err, ledger.ErrNotFound) {
		t.Fatalf("delete of a missing token: %v, want ErrNotFound", err)
	}
	if toks, _ := b.AdminTokens(); len(toks) != 1 {
		t.Fatalf("after delete: %v", toks)
	}
}

func testReopen(t *testing.T, h Harness) {
	open := h.New(t)
	b, err := open()
	if err != nil {
		t.Fatal(err)
	}
	v := map[string]uint64{}
	evs, head := Events(t, ledger.GenesisHead(), 3, v, "task/a", "task/b")
	if err := b.Append(&ledger.Batch{Expected: ledger.GenesisHead(), Events: evs,
		Soft: []ledger.SoftRecord{{Key: "presence/d", Value: []byte("p")}}, ManualClock: &ledger.ManualClock{Enabled: true, Now: 7}}); err != nil {
		t.Fatal(err)
	}
	if err := b.PutAdminToken("initial", []byte("h")); err != nil {
		t.Fatal(err)
	}
	if err := b.Close(); err != nil {
		t.Fatalf("close: %v", err)
	}
	b = MustOpen(t, open)
	sameHead(t, mustHead(t, b), head)
	sameEvents(t, all(t, b), evs)
	if got := softMap(t, b, ""); got["presence/d"] != "p" {
		t.Fatalf("soft records after reopen: %v", got)
	}
	if mc, _ := b.ManualClock(); mc.Now != 7 {
		t.Fatalf("manual clock after reopen: %+v", mc)
	}
	if toks, _ := b.AdminTokens(); string(toks["initial"]) != "h" {
		t.Fatalf("admin tokens after reopen: %v", toks)
	}
	// The reopened log continues where it was.
	more, next := Events(t, head, 2, v, "task/a")
	if err := b.Append(&ledger.Batch{Expected: head, Events: more}); err != nil {
		t.Fatalf("append after reopen: %v", err)
	}
	sameHead(t, mustHead(t, b), next)
	n := 0
	_ = b.Stream("task/a", func(*ledger.Event) error { n++; return nil })
	if n != 4 {
		t.Fatalf("stream after reopen and append: %d events, want 4", n)
	}
}

// race appends one batch per writer, all decided at head, at once, and
// returns how many won; every loser must see ErrHeadMoved.
func race(t *testing.T, writers []ledger.Backend, head ledger.Head) (wins int, winner []*ledger.Event) {
	t.Helper()
	batches := make([][]*ledger.Event, len(writers))
	for i := range writers {
		// Different content per writer: different hashes.
		evs, _ := Events(t, head, 2, map[string]uint64{}, fmt.Sprintf("task/w%d", i))
		batches[i] = evs
	}
	errs := make([]error, len(writers))
	var wg sync.WaitGroup
	start := make(chan struct{})
	for i, w := range writers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			<-start
			errs[i] = w.Append(&ledger.Batch{Expected: head, Events: batches[i]})
		}()
	}
	close(start)
	wg.Wait()
	for i, err := range errs {
		switch {
		case err == nil:
			wins++
			winner = batches[i]
		case errors.Is(err, ledger.ErrHeadMoved):
		default:
			t.Fatalf("writer %d: %v, want nil or ErrHeadMoved", i, err)
		}
	}
	return wins, winner
}

func testConcurrentOneWins(t *testing.T, h Harness) {
	b := MustOpen(t, h.New(t))
	writers := make([]ledger.Backend, 8)
	for i := range writers {
		writers[i] = b
	}
	wins, winner := race(t, writers, ledger.GenesisHead())
	if wins != 1 {
		t.Fatalf("%d appenders won at the same head, want exactly 1", wins)
	}
	sameEvents(t, all(t, b), winner)
}

func testConcurrentWritersOneWins(t *testing.T, h Harness) {
	open := h.New(t)
	writers := make([]ledger.Backend, 4)
	for i := range writers {
		writers[i] = MustOpen(t, open)
	}
	head := ledger.GenesisHead()
	for round := 0; round < 3; round++ {
		wins, winner := race(t, writers, head)
		if wins != 1 {
			t.Fatalf("round %d: %d writers won at the same head, want exactly 1", round, wins)
		}
		last := winner[len(winner)-1]
		head = ledger.Head{Seq: last.Seq, Hash: last.Hash, At: last.At}
		for i, w := range writers {
			if got := mustHead(t, w); got.Seq != head.Seq || !bytes.Equal(got.Hash, head.Hash) {
				t.Fatalf("round %d: writer %d sees head %d, want %d", round, i, got.Seq, head.Seq)
			}
		}
	}
	if got := all(t, writers[0]); len(got) != 6 {
		t.Fatalf("log holds %d events after three rounds of two, want 6", len(got))
	}
}

func testStaleWriterRefused(t *testing.T, h Harness) {
	open := h.New(t)
	a, b := MustOpen(t, open), MustOpen(t, open)
	evs, head := Events(t, ledger.GenesisHead(), 1, map[string]uint64{})
	if err := a.Append(&ledger.Batch{Expected: ledger.GenesisHead(), Events: evs}); err != nil {
		t.Fatal(err)
	}
	sameHead(t, mustHead(t, b), head) // b has seen a's batch
	// b appends; a, who has not looked since, appends at its own head.
	mine, bHead := Events(t, head, 1, map[string]uint64{"task/a": 1}, "task/a")
	if err := b.Append(&ledger.Batch{Expected: head, Events: mine}); err != nil {
		t.Fatal(err)
	}
	theirs, _ := Events(t, head, 3, map[string]uint64{"task/a": 1}, "task/x")
	if err := a.Append(&ledger.Batch{Expected: head, Events: theirs}); !errors.Is(err, ledger.ErrHeadMoved) {
		t.Fatalf("the stale writer's batch: %v, want ErrHeadMoved", err)
	}
	sameHead(t, mustHead(t, a), bHead)
	sameEvents(t, all(t, a), append(evs, mine...))
}
