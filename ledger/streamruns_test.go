package ledger

import (
	"encoding/binary"
	"errors"
	"fmt"
	"math/rand/v2"
	"testing"

	bolt "go.etcd.io/bbolt"
)

func fileFormat(t *testing.T, s *Store) uint64 {
	t.Helper()
	var v uint64
	if err := s.db.View(func(tx *bolt.Tx) error {
		v = binary.BigEndian.Uint64(tx.Bucket(bucketMeta).Get(keyFormat))
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	return v
}

func setFileFormat(t *testing.T, s *Store, v uint64) {
	t.Helper()
	if err := s.db.Update(func(tx *bolt.Tx) error { return tx.Bucket(bucketMeta).Put(keyFormat, u64(v)) }); err != nil {
		t.Fatal(err)
	}
}

// TestStreamIndexWritesOneRunPerStreamAndPass: a pass writes one key per
// stream, its first version in the pass, whose value is the stream's seqs
// of the pass in order; the next pass adds one key per stream it holds;
// reads by stream are complete and in order.
func TestStreamIndexWritesOneRunPerStreamAndPass(t *testing.T) {
	lowIndexBatch(t, 12)
	lowIndexChunk(t, 100) // a pass in one chunk
	s := mustOpen(t, t.TempDir())
	streams := []string{"task/a", "task/b", "device/c"}
	seqs := map[string][]uint64{}
	head := appendRoundRobin(t, s, GenesisHead(), streams, 6, 2, seqs) // the pass is written at seq 12
	var c bucketCount
	_ = s.db.View(func(tx *bolt.Tx) error { c = indexEntries(tx); return nil })
	if c.keys != 3 || c.seqs != 12 {
		t.Fatalf("after a pass of 12 events over 3 streams: %d keys holding %d seqs, want 3 and 12", c.keys, c.seqs)
	}
	_ = s.db.View(func(tx *bolt.Tx) error {
		v := tx.Bucket(bucketStreams).Get(streamKey("task/a", 1))
		var got []uint64
		for ; len(v) >= 8; v = v[8:] {
			got = append(got, binary.BigEndian.Uint64(v[:8]))
		}
		if len(got) != 4 || got[0] != seqs["task/a"][0] || got[3] != seqs["task/a"][3] {
			t.Errorf("task/a's run: %v, want its first four seqs %v", got, seqs["task/a"][:4])
		}
		return nil
	})
	checkStreams(t, s, seqs)
	appendRoundRobin(t, s, head, streams, 6, 2, seqs) // the second pass, at seq 24
	_ = s.db.View(func(tx *bolt.Tx) error { c = indexEntries(tx); return nil })
	if c.keys != 6 || c.seqs != 24 {
		t.Fatalf("after two passes: %d keys holding %d seqs, want 6 and 24", c.keys, c.seqs)
	}
	checkStreams(t, s, seqs)
	if err := s.Check(); err != nil {
		t.Fatal(err)
	}
}

// TestStreamReadsEachSeqOnceWhenAPassIsWrittenTwice: a pass cut short by
// a restart is written again from its start. When the first attempt wrote
// one key per event (a binary of the first format) and the second writes
// runs, the bucket holds both; a read gives each event once, in order.
func TestStreamReadsEachSeqOnceWhenAPassIsWrittenTwice(t *testing.T) {
	lowIndexBatch(t, 12)
	lowIndexChunk(t, 100)
	s := mustOpen(t, t.TempDir())
	streams := []string{"task/a", "task/b", "task/c"}
	seqs := map[string][]uint64{}
	head := appendRoundRobin(t, s, GenesisHead(), streams, 5, 2, seqs) // 10 events: no pass yet
	singles := len(seqs["task/a"])
	if err := s.db.Update(func(tx *bolt.Tx) error { // the first attempt's keys, one per event
		for i, seq := range seqs["task/a"] {
			if err := tx.Bucket(bucketStreams).Put(streamKey("task/a", uint64(i+1)), u64(seq)); err != nil {
				return err
			}
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	checkStreams(t, s, seqs)
	appendRoundRobin(t, s, head, streams, 1, 2, seqs) // 12: the pass, as runs
	var c bucketCount
	_ = s.db.View(func(tx *bolt.Tx) error { c = indexEntries(tx); return nil })
	if want := 3 + singles - 1; c.keys != want || c.seqs != 12+singles-1 {
		t.Fatalf("%d keys holding %d seqs, want %d holding %d: the three runs and task/a's single keys after its first version",
			c.keys, c.seqs, want, 12+singles-1)
	}
	checkStreams(t, s, seqs)
}

// TestFormatMovesWithTheFirstRun: a new ledger is written at the current
// format; a file of the first format opens unchanged, read-only and
// read-write, and its first run moves it to the current format in the
// same commit; a format this build does not know is refused.
func TestFormatMovesWithTheFirstRun(t *testing.T) {
	lowIndexBatch(t, 12)
	lowIndexChunk(t, 100)
	dir := t.TempDir()
	s := mustOpen(t, dir)
	if got := fileFormat(t, s); got != FormatVersion {
		t.Fatalf("a new ledger's format: %d, want %d", got, FormatVersion)
	}
	setFileFormat(t, s, formatFirst)
	s.Close()

	ro, err := Open(dir, Options{ReadOnly: true})
	if err != nil {
		t.Fatalf("a first-format file read-only: %v", err)
	}
	ro.Close()
	s = mustOpen(t, dir)
	streams := []string{"task/a", "task/b", "task/c"}
	seqs := map[string][]uint64{}
	head := appendRoundRobin(t, s, GenesisHead(), streams, 5, 2, seqs)
	if got := fileFormat(t, s); got != formatFirst {
		t.Fatalf("after opening and appending without a pass: format %d, want %d (unchanged)", got, formatFirst)
	}
	appendRoundRobin(t, s, head, streams, 1, 2, seqs)
	if got := fileFormat(t, s); got != formatRuns {
		t.Fatalf("after the first pass of runs: format %d, want %d", got, formatRuns)
	}
	checkStreams(t, s, seqs)

	for _, v := range []uint64{0, FormatVersion + 1} {
		dir := t.TempDir()
		s := mustOpen(t, dir)
		setFileFormat(t, s, v)
		s.Close()
		if _, err := Open(dir, Options{ReadOnly: true}); !errors.Is(err, ErrFormat) {
			t.Fatalf("format %d read-only: %v, want ErrFormat", v, err)
		}
		if _, err := Open(dir, Options{}); !errors.Is(err, ErrFormat) {
			t.Fatalf("format %d: %v, want ErrFormat", v, err)
		}
	}
}

// TestStreamIndexEntryOfABadLengthIsCorrupt: a value that is not whole
// seqs is reported as corruption by both readers, not read as a seq.
func TestStreamIndexEntryOfABadLengthIsCorrupt(t *testing.T) {
	s := mustOpen(t, t.TempDir())
	for _, v := range [][]byte{{}, make([]byte, 12)} {
		if err := s.db.Update(func(tx *bolt.Tx) error {
			return tx.Bucket(bucketStreams).Put(streamKey("task/x", 1), v)
		}); err != nil {
			t.Fatal(err)
		}
		if err := s.Stream("task/x", func(*Event) error { return nil }); !errors.Is(err, ErrCorrupt) {
			t.Fatalf("Stream over a %d-byte entry: %v, want ErrCorrupt", len(v), err)
		}
		if _, err := s.StreamStart("task/x"); !errors.Is(err, ErrCorrupt) {
			t.Fatalf("StreamStart over a %d-byte entry: %v, want ErrCorrupt", len(v), err)
		}
	}
}

// TestStreamReadsStayCompleteThroughRandomPassesAndRestarts: with random
// pass, chunk and sort thresholds, random batches over streams of related
// names, and the ledger reopened at random (passes cut short and written
// again), every stream reads complete and in order throughout.
func TestStreamReadsStayCompleteThroughRandomPassesAndRestarts(t *testing.T) {
	for seed := range uint64(20) {
		t.Run(fmt.Sprint(seed), func(t *testing.T) {
			r := rand.New(rand.NewPCG(seed, 1))
			lowIndexBatch(t, 8+r.IntN(30))
			lowIndexChunk(t, 1+r.IntN(10))
			old := streamIndexSortOff
			streamIndexSortOff = 1 + r.IntN(40)
			t.Cleanup(func() { streamIndexSortOff = old })
			dir := t.TempDir()
			opt := Options{NoSync: true} // reads are the point, not durability
			s, err := Open(dir, opt)
			if err != nil {
				t.Fatal(err)
			}
			defer func() { s.Close() }()
			streams := []string{"task/a", "task/b", "task/c", "device/x", "task/aa", "t"}
			seqs := map[string][]uint64{}
			head := GenesisHead()
			for range 300 {
				names := make([]string, 1+r.IntN(6))
				for i := range names {
					names[i] = streams[r.IntN(len(streams))]
				}
				head = appendOn(t, s, head, names, seqs)
				if r.IntN(15) == 0 {
					s.Close()
					if s, err = Open(dir, opt); err != nil {
						t.Fatal(err)
					}
				}
				if r.IntN(5) == 0 {
					checkStreams(t, s, seqs)
				}
			}
			checkStreams(t, s, seqs)
			if err := s.Check(); err != nil {
				t.Fatal(err)
			}
		})
	}
}
