package snapshots

import (
	"os"
	"path/filepath"
	"testing"
)

// The snapshot reader never panics on any file content, and what it
// accepts names the seq of its file name.
func FuzzSnapshotDecode(f *testing.F) {
	dir := f.TempDir()
	for _, seq := range []uint64{1, 7, 1 << 40} {
		path, err := Write(dir, snap(seq, "state"))
		if err != nil {
			f.Fatal(err)
		}
		b, err := os.ReadFile(path)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(seq, b)
		f.Add(seq, b[:len(b)/2])
	}
	f.Add(uint64(0), []byte{})
	f.Fuzz(func(t *testing.T, seq uint64, b []byte) {
		s, err := Decode(filepath.Join(dir, FileName(seq)), b)
		if err != nil {
			return
		}
		if s.Seq != seq {
			t.Fatalf("accepted a snapshot of seq %d under the name of seq %d", s.Seq, seq)
		}
	})
}
