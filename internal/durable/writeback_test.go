package durable

import (
	"bufio"
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"testing"
)

// A snapshot is written back a FlushAfter chunk at a time, each chunk
// once, in order, none past what was written; the tail under a chunk is
// left to the final fsync.
func TestWritebackFlushesEveryChunkOnce(t *testing.T) {
	f, err := os.Create(filepath.Join(t.TempDir(), "f"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var got [][2]int64
	w := &writeback{f: f, flush: func(_ *os.File, off, n int64) error {
		got = append(got, [2]int64{off, n})
		return nil
	}}
	bw := bufio.NewWriterSize(w, 64<<10)
	size := 3*FlushAfter + FlushAfter/2
	// Writes smaller than a chunk add up; one larger than several (bufio
	// passes it straight through) is cut at each chunk's end.
	if _, err := bw.Write(make([]byte, 1000)); err != nil {
		t.Fatal(err)
	}
	if _, err := bw.Write(make([]byte, size-1000)); err != nil {
		t.Fatal(err)
	}
	if err := bw.Flush(); err != nil {
		t.Fatal(err)
	}
	want := [][2]int64{{0, FlushAfter}, {FlushAfter, FlushAfter}, {2 * FlushAfter, FlushAfter}}
	if len(got) != len(want) {
		t.Fatalf("writebacks %v, want %v", got, want)
	}
	for i := range want {
		if got[i] != want[i] {
			t.Fatalf("writebacks %v, want %v", got, want)
		}
	}
	if st, _ := f.Stat(); st.Size() != int64(size) {
		t.Errorf("file holds %d bytes, %d written", st.Size(), size)
	}
}

// A failed writeback is advisory: the write goes on, and what was written
// is all there.
func TestAFailedWritebackDoesNotFailTheWrite(t *testing.T) {
	f, err := os.Create(filepath.Join(t.TempDir(), "f"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	calls := 0
	w := &writeback{f: f, flush: func(*os.File, int64, int64) error { calls++; return errors.New("no writeback here") }}
	data := make([]byte, 2*FlushAfter+100)
	for i := range data {
		data[i] = byte(i * 7)
	}
	if n, err := w.Write(data); err != nil || n != len(data) {
		t.Fatalf("Write = %d, %v; want %d, nil", n, err, len(data))
	}
	if calls != 2 {
		t.Errorf("%d writebacks, want 2", calls)
	}
	back, err := os.ReadFile(f.Name())
	if err != nil || !bytes.Equal(back, data) {
		t.Fatalf("read back %d bytes (%v), want the %d written", len(back), err, len(data))
	}
}

// The system's writeback takes a range just written (on Linux,
// sync_file_range with these flags: a wrong flag is EINVAL).
func TestStartWritebackTakesARangeJustWritten(t *testing.T) {
	f, err := os.Create(filepath.Join(t.TempDir(), "f"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if _, err := f.Write(make([]byte, 3*4096)); err != nil {
		t.Fatal(err)
	}
	if err := startWriteback(f, 4096, 2*4096); err != nil {
		t.Fatalf("writeback of a written range: %v", err)
	}
}
