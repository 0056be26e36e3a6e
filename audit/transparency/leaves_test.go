package transparency

import (
	"bytes"
	"errors"
	"fmt"
	"testing"

	"taskledger/audit/merkle"
)

func memLog(n int) *memStore {
	m := &memStore{cps: map[uint64][]byte{}}
	for i := range n {
		m.raws = append(m.raws, fmt.Appendf(nil, "event %d %s", i, bytes.Repeat([]byte{byte(i)}, i%300)))
	}
	return m
}

// TestBuildReadsTilesBackFromTheLog: the tree Build keeps (tiled, its
// leaves read back from the log) answers every proof as the tree keeping
// every node, and an event changed in the log after the build is refused
// (merkle.ErrTile) rather than proved.
func TestBuildReadsTilesBackFromTheLog(t *testing.T) {
	st := memLog(1000)
	tiled, err := Build(st)
	if err != nil {
		t.Fatal(err)
	}
	full, err := BuildFull(st)
	if err != nil {
		t.Fatal(err)
	}
	if tiled.TileHeight() != TileHeight || full.TileHeight() != 0 || !tiled.Equal(full) {
		t.Fatalf("tile heights %d and %d, or other roots", tiled.TileHeight(), full.TileHeight())
	}
	for _, c := range [][2]uint64{{0, 1000}, {255, 256}, {256, 1000}, {700, 769}, {999, 1000}} {
		a, err := tiled.Inclusion(c[0], c[1])
		if err != nil {
			t.Fatal(err)
		}
		b, _ := full.Inclusion(c[0], c[1])
		if fmt.Sprint(a) != fmt.Sprint(b) {
			t.Fatalf("inclusion %v differs from the full tree's", c)
		}
		a, err = tiled.Consistency(c[0]+1, c[1])
		if err != nil {
			t.Fatal(err)
		}
		b, _ = full.Consistency(c[0]+1, c[1])
		if fmt.Sprint(a) != fmt.Sprint(b) {
			t.Fatalf("consistency %v differs from the full tree's", c)
		}
	}
	fresh, err := Build(st) // no tile read back yet (a tile read is kept in a small cache)
	if err != nil {
		t.Fatal(err)
	}
	st.raws[5] = append([]byte(nil), st.raws[5]...)
	st.raws[5][0] ^= 1
	if _, err := fresh.Inclusion(5, 1000); !errors.Is(err, merkle.ErrTile) {
		t.Fatalf("proof over a changed event: %v", err)
	}
}

// TestLeavesRefusesALogShorterThanTheTree: a log that ends, or skips a
// seq, inside the range a tile needs gives ErrLogShort.
func TestLeavesRefusesALogShorterThanTheTree(t *testing.T) {
	st := memLog(300)
	out := make([][merkle.HashSize]byte, 256)
	if err := (Leaves{Store: st}).LeafHashes(0, 256, out); err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(out[255][:], merkle.LeafHash(st.raws[255])) {
		t.Fatal("leaf 255 is not the hash of the event of seq 256")
	}
	if err := (Leaves{Store: memLog(200)}).LeafHashes(0, 256, out); !errors.Is(err, ErrLogShort) {
		t.Fatalf("a log of 200 events: %v", err)
	}
	gap := gapStore{st}
	if err := (Leaves{Store: gap}).LeafHashes(0, 256, out); !errors.Is(err, ErrLogShort) {
		t.Fatalf("a log that skips seq 11: %v", err)
	}
}

// gapStore is a log without the event of seq 11.
type gapStore struct{ *memStore }

func (g gapStore) RangeRaw(after uint64, fn func(uint64, []byte) error) error {
	return g.memStore.RangeRaw(after, func(seq uint64, raw []byte) error {
		if seq == 11 {
			return nil
		}
		return fn(seq, raw)
	})
}
