package ledger

import (
	"errors"
	"fmt"
	"maps"
	"slices"
	"sync"
	"testing"

	bolt "go.etcd.io/bbolt"
)

// lowIndexBatch makes Append write the stream index every n events.
func lowIndexBatch(t *testing.T, n int) {
	old := streamIndexBatch
	streamIndexBatch = n
	t.Cleanup(func() { streamIndexBatch = old })
}

// lowIndexChunk makes a pass write at least n entries per Append.
func lowIndexChunk(t *testing.T, n int) {
	old := streamIndexChunk
	streamIndexChunk = n
	t.Cleanup(func() { streamIndexChunk = old })
}

// appendRoundRobin appends batches of events spread over streams and
// returns the seqs of each stream in order.
func appendRoundRobin(t testing.TB, s *Store, head Head, streams []string, batches, perBatch int, seqs map[string][]uint64) Head {
	t.Helper()
	for range batches {
		names := make([]string, perBatch)
		for i := range names { // event i follows head by i events: (head.Seq + i) + i
			names[i] = streams[(int(head.Seq)+2*i)%len(streams)]
		}
		head = appendOn(t, s, head, names, seqs)
	}
	return head
}

// appendOn appends one batch continuing head, an event on each of names
// in turn, and records their seqs in seqs.
func appendOn(t testing.TB, s *Store, head Head, names []string, seqs map[string][]uint64) Head {
	t.Helper()
	var evs []*Event
	h := head
	for i, name := range names {
		body, _ := Marshal(map[string]any{"i": i})
		e := &Event{Stream: name, StreamVersion: uint64(len(seqs[name]) + 1), Type: "test.event", Schema: 1,
			At: h.At + 1, Actor: Actor{Kind: ActorSystem, ID: "taskledger"}, Body: body}
		var err error
		if h, err = Seal(e, h); err != nil {
			t.Fatal(err)
		}
		seqs[name] = append(seqs[name], e.Seq)
		evs = append(evs, e)
	}
	if err := s.Append(&Batch{Expected: head, Events: evs}); err != nil {
		t.Fatal(err)
	}
	return h
}

// bucketCount is what the streams bucket holds: keys, and the seqs of
// their runs.
type bucketCount struct{ keys, seqs int }

func indexEntries(tx *bolt.Tx) bucketCount {
	var c bucketCount
	_ = tx.Bucket(bucketStreams).ForEach(func(_, v []byte) error {
		c.keys++
		c.seqs += len(v) / 8
		return nil
	})
	return c
}

// firstChunk is how many seqs a pass through seq `through` writes in its
// first chunk of at least min entries: the streams in key order, each
// whole (a run is never cut).
func firstChunk(seqs map[string][]uint64, through uint64, min int) int {
	n := 0
	for _, name := range slices.Sorted(maps.Keys(seqs)) {
		for _, seq := range seqs[name] {
			if seq <= through {
				n++
			}
		}
		if n >= min {
			return n
		}
	}
	return n
}

func checkStreams(t *testing.T, s *Store, seqs map[string][]uint64) {
	t.Helper()
	for name, want := range seqs {
		var got []uint64
		if err := s.Stream(name, func(e *Event) error {
			if e.Stream != name || e.StreamVersion != uint64(len(got)+1) {
				return fmt.Errorf("stream %s gave %s v%d at position %d", name, e.Stream, e.StreamVersion, len(got)+1)
			}
			got = append(got, e.Seq)
			return nil
		}); err != nil {
			t.Fatal(err)
		}
		if fmt.Sprint(got) != fmt.Sprint(want) {
			t.Fatalf("stream %s: %v, want %v", name, got, want)
		}
		if first, err := s.StreamStart(name); err != nil || first != want[0] {
			t.Fatalf("stream %s starts at %d (%v), want %d", name, first, err, want[0])
		}
	}
	if first, err := s.StreamStart("task/none"); err != nil || first != 0 {
		t.Fatalf("a stream the log does not have starts at %d (%v), want 0", first, err)
	}
}

// TestStreamIndexDeferred: the streams bucket is written in bulk every
// streamIndexBatch events; Stream reads stay complete before and after each
// bulk write, after a refused batch, and after reopening (read-write and
// read-only), where the tail is rebuilt from the events.
func TestStreamIndexDeferred(t *testing.T) {
	lowIndexBatch(t, 7)
	dir := t.TempDir()
	s, err := Open(dir, Options{})
	if err != nil {
		t.Fatal(err)
	}
	streams := []string{"task/a", "task/b", "task/bb", "device/c"}
	seqs := map[string][]uint64{}
	head := GenesisHead()
	for range 5 { // 5 × 3 events: a bulk write at seq 9, then a tail of 6
		head = appendRoundRobin(t, s, head, streams, 1, 3, seqs)
		checkStreams(t, s, seqs)
	}
	// A refused batch changes nothing, in the bucket or in memory.
	stale, _ := sealed(t, GenesisHead(), 1, "task/a", 99)
	if err := s.Append(&Batch{Expected: GenesisHead(), Events: stale}); err == nil {
		t.Fatal("a batch against the old head was accepted")
	}
	checkStreams(t, s, seqs)
	var indexed uint64
	_ = s.db.View(func(tx *bolt.Tx) error { indexed = indexedThrough(tx); return nil })
	if indexed == 0 || indexed >= head.Seq {
		t.Fatalf("indexed through %d with head %d: the test wants both a bulk write and a tail", indexed, head.Seq)
	}
	if err := s.Check(); err != nil {
		t.Fatal(err)
	}
	s.Close()

	ro, err := Open(dir, Options{ReadOnly: true})
	if err != nil {
		t.Fatal(err)
	}
	checkStreams(t, ro, seqs)
	ro.Close()

	s = mustOpen(t, dir)
	checkStreams(t, s, seqs)
	head = appendRoundRobin(t, s, head, streams, 5, 4, seqs)
	checkStreams(t, s, seqs)
}

// TestStreamIndexLegacyComplete: a ledger without the streams_indexed
// meta key (every entry in the bucket) reads as before and starts
// deferring from its head.
func TestStreamIndexLegacyComplete(t *testing.T) {
	lowIndexBatch(t, 1) // every append writes the bucket: like the old format
	dir := t.TempDir()
	s, err := Open(dir, Options{})
	if err != nil {
		t.Fatal(err)
	}
	seqs := map[string][]uint64{}
	head := appendRoundRobin(t, s, GenesisHead(), []string{"x", "y"}, 3, 2, seqs)
	_ = s.db.Update(func(tx *bolt.Tx) error { return tx.Bucket(bucketMeta).Delete(keyStreamsIndexed) })
	s.Close()
	streamIndexBatch = 1000
	s = mustOpen(t, dir)
	checkStreams(t, s, seqs)
	appendRoundRobin(t, s, head, []string{"x", "y"}, 2, 2, seqs)
	checkStreams(t, s, seqs)
}

// TestStreamReadsDuringAppends: concurrent Stream reads across bulk
// writes always see a dense prefix of each stream (run with -race).
func TestStreamReadsDuringAppends(t *testing.T) {
	lowIndexBatch(t, 16)
	s := mustOpen(t, t.TempDir())
	streams := []string{"s1", "s2", "s3"}
	seqs := map[string][]uint64{}
	done := make(chan struct{})
	var wg sync.WaitGroup
	errs := make(chan error, 3)
	for _, name := range streams {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				select {
				case <-done:
					return
				default:
				}
				n := 0
				err := s.Stream(name, func(e *Event) error {
					n++
					if e.StreamVersion != uint64(n) {
						return fmt.Errorf("%s: version %d at position %d", name, e.StreamVersion, n)
					}
					return nil
				})
				if err != nil {
					errs <- err
					return
				}
			}
		}()
	}
	appendRoundRobin(t, s, GenesisHead(), streams, 40, 5, seqs)
	close(done)
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	checkStreams(t, s, seqs)
}

// TestStreamIndexPassSpreadOverAppends: a pass is written a chunk per
// Append, in key order; the indexed seq moves only with its last chunk;
// Stream reads are complete (no entry twice) before, during and after it,
// and after reopening in the middle of one (read-only, and read-write,
// where the pass starts again and completes).
func TestStreamIndexPassSpreadOverAppends(t *testing.T) {
	lowIndexBatch(t, 12)
	lowIndexChunk(t, 1) // 2 × the batch's events per Append
	dir := t.TempDir()
	s := mustOpen(t, dir)
	streams := []string{"task/a", "task/b", "task/bb", "device/c", "task/c"}
	seqs := map[string][]uint64{}
	head := GenesisHead()
	indexed := func(s *Store) (seq uint64, inBucket int) {
		_ = s.db.View(func(tx *bolt.Tx) error {
			seq, inBucket = indexedThrough(tx), indexEntries(tx).seqs
			return nil
		})
		return seq, inBucket
	}
	for range 6 { // 6 × 2 events: the pass starts at seq 12
		head = appendRoundRobin(t, s, head, streams, 1, 2, seqs)
		checkStreams(t, s, seqs)
	}
	if s.index.pass == nil {
		t.Fatal("no pass under way after 12 events with a batch of 12 and chunks of 4")
	}
	if seq, n := indexed(s); seq != 0 || n != firstChunk(seqs, 12, 4) {
		t.Fatalf("after the first chunk: indexed through %d with %d seqs in the bucket, want 0 and %d (4, to its last stream's end)", seq, n, firstChunk(seqs, 12, 4))
	}
	s.Close()

	ro, err := Open(dir, Options{ReadOnly: true})
	if err != nil {
		t.Fatal(err)
	}
	checkStreams(t, ro, seqs) // the bucket's first chunk and the rebuilt tail, each entry once
	ro.Close()

	s = mustOpen(t, dir)
	checkStreams(t, s, seqs)
	for range 6 {
		head = appendRoundRobin(t, s, head, streams, 1, 2, seqs)
		checkStreams(t, s, seqs)
	}
	seq, n := indexed(s)
	if seq < 12 || n < 12 {
		t.Fatalf("indexed through %d with %d seqs: the restarted pass did not complete", seq, n)
	}
	if got := len(s.index.pending); uint64(got) != head.Seq-seq {
		t.Fatalf("%d entries pending after seq %d with head %d", got, seq, head.Seq)
	}
	if err := s.Check(); err != nil {
		t.Fatal(err)
	}
}

// TestStreamIndexPassSortedOffTheCommitPath: from streamIndexSortOff
// entries a pass is sorted by a goroutine: the Append that starts it
// writes no chunk, the first Append after the sort is done writes the
// first; an Append that does not commit drops the sort it started; reads
// are complete throughout, and the pass completes.
func TestStreamIndexPassSortedOffTheCommitPath(t *testing.T) {
	lowIndexBatch(t, 12)
	lowIndexChunk(t, 1) // 2 × the batch's events per Append
	old := streamIndexSortOff
	streamIndexSortOff = 12
	t.Cleanup(func() { streamIndexSortOff = old })
	s := mustOpen(t, t.TempDir())
	streams := []string{"task/a", "task/b", "task/bb", "device/c", "task/c"}
	seqs := map[string][]uint64{}
	inBucket := func() (seq uint64, n int) {
		_ = s.db.View(func(tx *bolt.Tx) error {
			seq, n = indexedThrough(tx), indexEntries(tx).seqs
			return nil
		})
		return seq, n
	}
	head := appendRoundRobin(t, s, GenesisHead(), streams, 5, 2, seqs)

	// An Append that reaches the batch but does not commit (its read-model
	// write is refused after the index was written) leaves no sort behind.
	evs, _ := sealed(t, head, 2, "task/a", uint64(len(seqs["task/a"])+1))
	bad := &Batch{Expected: head, Events: evs, ReadModel: []ReadModelWrite{{Bucket: "not-a-read-model", Key: []byte("k"), Value: []byte("v")}}}
	if err := s.Append(bad); !errors.Is(err, ErrBadBatch) {
		t.Fatalf("a batch with a bad read-model bucket: %v, want ErrBadBatch", err)
	}
	if s.index.sort != nil || len(s.index.pending) != 10 {
		t.Fatalf("after a refused Append: sort %v, %d pending; want none and 10", s.index.sort, len(s.index.pending))
	}

	head = appendRoundRobin(t, s, head, streams, 1, 2, seqs) // 12 entries: the sort starts
	if s.index.sort == nil || s.index.pass != nil {
		t.Fatalf("at 12 entries: sort %v, pass %v; want a sort and no pass yet", s.index.sort, s.index.pass)
	}
	if seq, n := inBucket(); seq != 0 || n != 0 {
		t.Fatalf("the Append that started the sort wrote %d seqs (indexed through %d), want none", n, seq)
	}
	checkStreams(t, s, seqs)
	<-s.index.sort.done
	head = appendRoundRobin(t, s, head, streams, 1, 2, seqs)
	if s.index.pass == nil || s.index.sort != nil {
		t.Fatalf("after the sort: pass %v, sort %v; want the pass under way", s.index.pass, s.index.sort)
	}
	if seq, n := inBucket(); seq != 0 || n != firstChunk(seqs, 12, 4) {
		t.Fatalf("after the first chunk: indexed through %d with %d seqs, want 0 and %d (4, to its last stream's end)", seq, n, firstChunk(seqs, 12, 4))
	}
	for range 3 {
		head = appendRoundRobin(t, s, head, streams, 1, 2, seqs)
		checkStreams(t, s, seqs)
	}
	if seq, n := inBucket(); seq != 12 || n != 12 {
		t.Fatalf("indexed through %d with %d seqs, want the pass complete: 12 and 12", seq, n)
	}
	if got := len(s.index.pending); uint64(got) != head.Seq-12 {
		t.Fatalf("%d entries pending after seq 12 with head %d", got, head.Seq)
	}
	if err := s.Check(); err != nil {
		t.Fatal(err)
	}
}
