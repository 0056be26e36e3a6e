package transparency

import (
	"bytes"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"taskledger/audit/checkpoint"
	"taskledger/audit/merkle"
	"taskledger/ledger"
)

// memStore is a Store of raw leaves in memory.
type memStore struct {
	raws [][]byte
	cps  map[uint64][]byte
}

func (m *memStore) RangeRaw(after uint64, fn func(uint64, []byte) error) error {
	for i := after; i < uint64(len(m.raws)); i++ {
		if err := fn(i+1, m.raws[i]); err != nil {
			if errors.Is(err, ledger.ErrStop) {
				return nil
			}
			return err
		}
	}
	return nil
}
func (m *memStore) Stream(string, func(*ledger.Event) error) error { return nil }
func (m *memStore) PutCheckpoint(size uint64, note []byte) error {
	m.cps[size] = note
	return nil
}
func (m *memStore) Checkpoint(size uint64) ([]byte, error) {
	if n, ok := m.cps[size]; ok {
		return n, nil
	}
	return nil, ledger.ErrNotFound
}
func (m *memStore) LatestCheckpoint() (uint64, []byte, error) {
	var best uint64
	for s := range m.cps {
		best = max(best, s)
	}
	if best == 0 {
		return 0, nil, ledger.ErrNotFound
	}
	return best, m.cps[best], nil
}

type fixedClock struct{}

func (fixedClock) Now() time.Time { return time.UnixMilli(1_700_000_000_000) }

// notSigningLog opens a shared log that does not sign, over a store of n
// events whose tree is empty (closed at the test's end).
func notSigningLog(t *testing.T, n int) (*memStore, *checkpoint.Key, *Log) {
	t.Helper()
	st := &memStore{cps: map[uint64][]byte{}}
	for i := range n {
		st.raws = append(st.raws, fmt.Appendf(nil, "event %d", i+1))
	}
	key, _, err := checkpoint.LoadOrCreateKey(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	l, err := OpenShared(st, merkle.New(), key, fixedClock{}, zerolog.Nop(), func() bool { return false })
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(l.Close)
	return st, key, l
}

// TestSharedLogFillsAGapAndSkipsWhatItHolds: a follower's tree that missed
// events (the engine reloaded without the hook) is filled from the store
// before the next leaves; leaves it holds already are skipped, with their
// hashes when the engine hashed them; a node that does not sign stores no
// checkpoint.
func TestSharedLogFillsAGapAndSkipsWhatItHolds(t *testing.T) {
	st, _, l := notSigningLog(t, 6)
	l.Committed(1, st.raws[:2], nil)
	l.Committed(5, st.raws[4:5], nil)                      // 3 and 4 missed: read from the store
	l.Committed(4, st.raws[3:6], leafHashes(st.raws[3:6])) // 4 and 5 held: only 6 added
	want, err := Build(st)
	if err != nil {
		t.Fatal(err)
	}
	if l.Tree().Size() != 6 || !l.Tree().Equal(want) {
		t.Fatalf("tree of %d leaves, want the 6 of the store", l.Tree().Size())
	}
	if len(st.cps) != 0 {
		t.Fatalf("a node that does not sign stored %d checkpoints", len(st.cps))
	}
}

// leafHashes hashes leaves as the engine does beside a commit.
func leafHashes(raws [][]byte) [][]byte {
	hs := make([][]byte, len(raws))
	for i, raw := range raws {
		hs[i] = merkle.LeafHash(raw)
	}
	return hs
}

// TestLeavesHandedOverWithTheirHashesGrowTheTreeAsTheBytesDo: leaves
// handed over with their hashes make the tree the bytes alone make; hashes
// that are not one per leaf are not used (the leaves are hashed again).
func TestLeavesHandedOverWithTheirHashesGrowTheTreeAsTheBytesDo(t *testing.T) {
	st, _, l := notSigningLog(t, 4)
	want, err := Build(st)
	if err != nil {
		t.Fatal(err)
	}
	l.Committed(1, st.raws[:2], leafHashes(st.raws[1:2])) // one hash, and another leaf's, for two leaves
	root, err := l.Tree().Root(2)
	if err != nil {
		t.Fatal(err)
	}
	if wantRoot, _ := want.Root(2); l.Tree().Size() != 2 || !bytes.Equal(root, wantRoot) {
		t.Fatalf("after hashes that are not one per leaf: %d leaves, want the store's first 2", l.Tree().Size())
	}
	l.Committed(3, st.raws[2:4], leafHashes(st.raws[2:4]))
	if l.Tree().Size() != 4 || !l.Tree().Equal(want) {
		t.Fatalf("tree of %d leaves from their hashes, want the 4 of the store", l.Tree().Size())
	}
}

// TestATreeBehindTheLogCatchesUpWhenAskedPastItsSize: the engine hands a
// batch's leaves over while the next batch commits, so the tree may trail
// the log. A checkpoint asked at a size the log holds but the tree does not
// yet (a snapshot's seq) catches up from the log first, as CatchUp does;
// the leaves handed over later are skipped, and the tree equals one built
// from the log.
func TestATreeBehindTheLogCatchesUpWhenAskedPastItsSize(t *testing.T) {
	st, key, l := notSigningLog(t, 5)
	l.Committed(1, st.raws[:2], nil) // 3 to 5 committed, their leaves not handed over yet
	note, err := l.SignAt(4)
	if err != nil {
		t.Fatalf("a checkpoint at a size the log holds, past the tree's: %v", err)
	}
	cp, err := checkpoint.Open(note, key.Verifier())
	if err != nil {
		t.Fatal(err)
	}
	if _, err := l.SignAt(6); !errors.Is(err, ErrBeyondLog) {
		t.Fatalf("a checkpoint past the log: %v, want ErrBeyondLog", err)
	}
	want, err := Build(st)
	if err != nil {
		t.Fatal(err)
	}
	if root, _ := want.Root(4); cp.Size != 4 || !bytes.Equal(cp.Root, root) {
		t.Fatalf("checkpoint of size %d, want the root of the log's first 4 events", cp.Size)
	}
	l.Committed(3, st.raws[2:5], nil) // the late hand-over: held already
	st.raws = append(st.raws, []byte("event 6"))
	if err := l.CatchUp(); err != nil {
		t.Fatal(err)
	}
	if want, err = Build(st); err != nil {
		t.Fatal(err)
	}
	if l.Tree().Size() != 6 || !l.Tree().Equal(want) {
		t.Fatalf("tree of %d leaves, want the 6 of the log", l.Tree().Size())
	}
}
