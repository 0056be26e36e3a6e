package snapshots

import (
	"bytes"
	"errors"
	"math/rand/v2"
	"os"
	"path/filepath"
	"testing"

	"taskledger/internal/durable"
	"taskledger/ledger"
)

// fakeLog is a log of n events whose hashes are seq-derived.
type fakeLog struct{ n uint64 }

func hashOf(seq uint64) []byte { return bytes.Repeat([]byte{byte(seq)}, ledger.HashSize) }

func (l fakeLog) Head() (ledger.Head, error) { return ledger.Head{Seq: l.n, Hash: hashOf(l.n)}, nil }

func (l fakeLog) Range(after uint64, fn func(*ledger.Event) error) error {
	for s := after + 1; s <= l.n; s++ {
		if err := fn(&ledger.Event{Seq: s, Hash: hashOf(s)}); err != nil {
			if errors.Is(err, ledger.ErrStop) {
				return nil
			}
			return err
		}
	}
	return nil
}

func snap(seq uint64, content string) *Snapshot {
	return &Snapshot{Header: Header{Seq: seq, Hash: hashOf(seq), At: int64(seq) * 1000, Schema: 1, Config: "c"},
		State: []byte(content)}
}

var want = Want{Schema: 1, Config: "c"}

func TestWriteReadRoundTrip(t *testing.T) {
	dir := t.TempDir()
	path, err := Write(dir, snap(7, "state-7"))
	if err != nil {
		t.Fatal(err)
	}
	if filepath.Base(path) != "snapshot-7.tlsnap" {
		t.Fatalf("name %s", path)
	}
	s, err := Read(path)
	if err != nil {
		t.Fatal(err)
	}
	if s.Seq != 7 || string(s.State) != "state-7" || s.Format != FormatVersion || !bytes.Equal(s.Hash, hashOf(7)) {
		t.Fatalf("read back %+v", s.Header)
	}
	if err := Check(s, want, fakeLog{n: 9}); err != nil {
		t.Fatal(err)
	}
	if m, _ := filepath.Glob(filepath.Join(dir, "*.tmp")); len(m) != 0 {
		t.Fatalf("temporary files left: %v", m)
	}
}

func TestEveryFlippedByteIsRefused(t *testing.T) {
	dir := t.TempDir()
	path, err := Write(dir, snap(3, "some projection bytes"))
	if err != nil {
		t.Fatal(err)
	}
	orig, _ := os.ReadFile(path)
	for i := range orig {
		b := append([]byte(nil), orig...)
		b[i] ^= 0x20
		_, err := Decode(path, b)
		if !errors.Is(err, ErrChecksum) && !errors.Is(err, ErrForeign) {
			t.Fatalf("byte %d flipped: err %v", i, err)
		}
	}
	if _, err := Decode(path, orig[:len(orig)-1]); err == nil {
		t.Fatal("truncated file accepted")
	}
}

func TestLoadNewestSkipsAndReports(t *testing.T) {
	dir := t.TempDir()
	for _, s := range []*Snapshot{snap(2, "two"), snap(4, "four")} {
		if _, err := Write(dir, s); err != nil {
			t.Fatal(err)
		}
	}
	// Newer files that must all be refused, and a .tmp that is skipped.
	other := snap(5, "five")
	other.Schema = 2
	if _, err := Write(dir, other); err != nil {
		t.Fatal(err)
	}
	wrongHash := snap(6, "six")
	wrongHash.Hash = hashOf(99)
	if _, err := Write(dir, wrongHash); err != nil {
		t.Fatal(err)
	}
	if _, err := Write(dir, snap(20, "beyond")); err != nil {
		t.Fatal(err)
	}
	os.WriteFile(filepath.Join(dir, "snapshot-8.tlsnap"), []byte("PK\x03\x04 a zip file, not ours......................................"), 0o600)
	p9, _ := Write(dir, snap(9, "nine"))
	b, _ := os.ReadFile(p9)
	b[len(b)/2] ^= 1
	os.WriteFile(p9, b, 0o600)
	os.WriteFile(filepath.Join(dir, "snapshot-10.tlsnap.tmp"), []byte("torn"), 0o600)
	os.WriteFile(filepath.Join(dir, "notes.txt"), []byte("x"), 0o600)
	renamed, _ := os.ReadFile(filepath.Join(dir, "snapshot-4.tlsnap"))
	os.WriteFile(filepath.Join(dir, "snapshot-7.tlsnap"), renamed, 0o600) // header says 4

	s, refused, err := LoadNewest(dir, want, fakeLog{n: 12})
	if err != nil {
		t.Fatal(err)
	}
	if s == nil || s.Seq != 4 || string(s.State) != "four" {
		t.Fatalf("loaded %+v", s)
	}
	wantErrs := map[uint64]error{20: ErrBeyondHead, 9: ErrChecksum, 8: ErrForeign, 7: ErrFormat, 6: ErrHashMismatch, 5: ErrSchema}
	if len(refused) != len(wantErrs) {
		t.Fatalf("refused %v", refused)
	}
	for _, r := range refused {
		if !errors.Is(r.Err, wantErrs[r.Seq]) {
			t.Errorf("seq %d refused with %v, want %v", r.Seq, r.Err, wantErrs[r.Seq])
		}
	}
}

func TestLoadNewestEmpty(t *testing.T) {
	s, refused, err := LoadNewest(filepath.Join(t.TempDir(), "missing"), want, fakeLog{n: 3})
	if s != nil || refused != nil || err != nil {
		t.Fatalf("got %v %v %v", s, refused, err)
	}
}

func TestPruneKeepsTheNewest(t *testing.T) {
	dir := t.TempDir()
	for _, seq := range []uint64{1, 2, 3, 4} {
		if _, err := Write(dir, snap(seq, "x")); err != nil {
			t.Fatal(err)
		}
	}
	os.WriteFile(filepath.Join(dir, "snapshot-3.tlsnap.tmp"), []byte("old torn"), 0o600)
	os.WriteFile(filepath.Join(dir, "snapshot-9.tlsnap.tmp"), []byte("newer torn"), 0o600)
	if err := Prune(dir, Keep); err != nil {
		t.Fatal(err)
	}
	list, _ := List(dir)
	if len(list) != 2 || list[0].Seq != 4 || list[1].Seq != 3 {
		t.Fatalf("after prune: %v", list)
	}
	if _, err := os.Stat(filepath.Join(dir, "snapshot-3.tlsnap.tmp")); !os.IsNotExist(err) {
		t.Fatal("old .tmp kept")
	}
}

// A snapshot larger than several chunks, written back on the way (the
// system's own writeback), reads back whole.
func TestLargeSnapshotRoundTrips(t *testing.T) {
	dir := t.TempDir()
	s := snap(42, "")
	s.State = make([]byte, 5*durable.FlushAfter+12345)
	r := rand.New(rand.NewPCG(1, 2))
	for i := range s.State {
		s.State[i] = byte(r.Uint32())
	}
	path, err := Write(dir, s)
	if err != nil {
		t.Fatal(err)
	}
	got, err := Read(path)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got.State, s.State) || got.Seq != 42 {
		t.Fatalf("read back seq %d and %d bytes, want seq 42 and the %d written", got.Seq, len(got.State), len(s.State))
	}
}
