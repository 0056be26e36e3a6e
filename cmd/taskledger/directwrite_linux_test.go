package main

import (
	"bytes"
	"math/rand/v2"
	"os"
	"path/filepath"
	"testing"
)

// The O_DIRECT archive writer writes exactly the bytes given, whatever the
// write sizes and a total that is no multiple of the block.
func TestDirectWriterWritesExactlyTheBytesGiven(t *testing.T) {
	for _, size := range []int{0, 1, 4095, directBlock, directBlock + 1, 3*directBlock + 777} {
		path := filepath.Join(t.TempDir(), "a.tar")
		f, _, err := openDirect(path) // direct or not (tmpfs), the bytes must be the same
		if err != nil {
			t.Fatal(err)
		}
		want := make([]byte, size)
		r := rand.New(rand.NewPCG(uint64(size), 1))
		for i := range want {
			want[i] = byte(r.Uint32())
		}
		w := newDirectWriter(f)
		for rest := want; len(rest) > 0; {
			n := min(len(rest), 1+r.IntN(70000))
			if k, err := w.Write(rest[:n]); err != nil || k != n {
				t.Fatalf("write %d: %d %v", n, k, err)
			}
			rest = rest[n:]
		}
		if err := w.Flush(); err != nil {
			t.Fatal(err)
		}
		if err := f.Close(); err != nil {
			t.Fatal(err)
		}
		got, err := os.ReadFile(path)
		if err != nil || !bytes.Equal(got, want) {
			t.Fatalf("size %d: read back %d bytes (%v), equal %v", size, len(got), err, bytes.Equal(got, want))
		}
	}
}
