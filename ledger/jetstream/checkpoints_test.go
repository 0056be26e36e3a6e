package jetstream_test

import (
	"errors"
	"testing"

	"taskledger/ledger"
	"taskledger/ledger/jetstream"
	"taskledger/ledger/jetstream/jstest"
)

// TestCheckpointsKeepTheFirstAtASizeAndTheLatestMovesForward: no
// checkpoint is ErrNotFound; a second note at a stored size leaves the
// first; a smaller size signed late does not become the latest; every
// node (another Log on the stream) reads the same.
func TestCheckpointsKeepTheFirstAtASizeAndTheLatestMovesForward(t *testing.T) {
	s := jstest.Server(t, false)
	open := func() *jetstream.Log {
		l, err := jetstream.Open(jetstream.Config{URL: s.ClientURL(), Name: "CPS"})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { l.Close() })
		return l
	}
	a, b := open(), open()
	if _, _, err := a.LatestCheckpoint(); !errors.Is(err, ledger.ErrNotFound) {
		t.Fatalf("latest of none: %v, want ErrNotFound", err)
	}
	if _, err := a.Checkpoint(3); !errors.Is(err, ledger.ErrNotFound) {
		t.Fatalf("size 3 of none: %v, want ErrNotFound", err)
	}
	put := func(l *jetstream.Log, size uint64, note string) {
		t.Helper()
		if err := l.PutCheckpoint(size, []byte(note)); err != nil {
			t.Fatal(err)
		}
	}
	put(a, 5, "five")
	put(b, 5, "five again") // a new sequencer re-signs the same size
	put(a, 9, "nine")
	put(b, 7, "seven, late") // a deposed signer, late
	for _, l := range []*jetstream.Log{a, b} {
		size, note, err := l.LatestCheckpoint()
		if err != nil || size != 9 || string(note) != "nine" {
			t.Fatalf("latest: %d %q %v, want 9 nine", size, note, err)
		}
		for size, want := range map[uint64]string{5: "five", 7: "seven, late", 9: "nine"} {
			if got, err := l.Checkpoint(size); err != nil || string(got) != want {
				t.Fatalf("size %d: %q %v, want %q", size, got, err, want)
			}
		}
	}
}
