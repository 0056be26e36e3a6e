package snapshots

import (
	"bytes"
	"hash/crc32"
	"math/rand/v2"
	"os"
	"path/filepath"
	"testing"
)

// TestCRC32Combine: combining the sums of two parts gives the sum of the
// whole, for parts of every small length and a few large ones.
func TestCRC32Combine(t *testing.T) {
	data := make([]byte, 3<<20)
	for i := range data {
		data[i] = byte(rand.IntN(256))
	}
	for _, cut := range []int{0, 1, 2, 3, 7, 8, 9, 1000, 1 << 20, len(data) - 1, len(data)} {
		for _, end := range []int{cut, cut + 1, cut + 5, len(data)} {
			if end > len(data) {
				continue
			}
			a, b := data[:cut], data[cut:end]
			got := crc32Combine(crc32.Checksum(a, castagnoli), crc32.Checksum(b, castagnoli), int64(len(b)))
			if want := crc32.Checksum(data[:end], castagnoli); got != want {
				t.Fatalf("cut %d end %d: %08x, want %08x", cut, end, got, want)
			}
		}
	}
}

// TestReadLargeInHalves: a snapshot large enough to be read in two halves
// reads back, and one flipped byte in either half is a checksum error.
func TestReadLargeInHalves(t *testing.T) {
	dir := t.TempDir()
	content := bytes.Repeat([]byte("0123456789abcdef"), parallelRead/16+12345)
	path, err := Write(dir, snap(3, string(content)))
	if err != nil {
		t.Fatal(err)
	}
	s, err := Read(path)
	if err != nil || !bytes.Equal(s.State, content) {
		t.Fatalf("read back: %v", err)
	}
	raw, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	for _, at := range []int{len(raw) / 4, len(raw) * 3 / 4, len(raw) - checksumSize - 1} {
		bad := append([]byte(nil), raw...)
		bad[at] ^= 1
		p := filepath.Join(dir, "snapshot-3.tlsnap")
		if err := os.WriteFile(p, bad, 0o600); err != nil {
			t.Fatal(err)
		}
		if _, err := Read(p); err != ErrChecksum {
			t.Fatalf("byte %d flipped: %v", at, err)
		}
	}
}
