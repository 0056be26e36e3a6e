package durable

import (
	"io"
	"os"
)

// FlushAfter is how many bytes of a large file (a snapshot, a backup
// archive) are written before they are pushed to the disk and waited for
// (writeback). Such a file is tens of megabytes or more written at once;
// left to its final fsync, all of it reaches the disk's queue together,
// and the ledger's commits, whose fdatasyncs queue behind it, stall until
// it is through (up to 324 ms measured with an 80 MB file on this
// project's test machine, docs/performance.md). Written back a chunk at a
// time, a commit waits for a chunk at most. The final fsync stays the
// point of durability.
const FlushAfter int64 = 1 << 20

// Writeback returns a writer to f, a file written from its start (new or
// truncated), that writes back every FlushAfter bytes written through it
// as it goes. The caller still fsyncs f at the end.
func Writeback(f *os.File) io.Writer { return &writeback{f: f, flush: startWriteback} }

// writeback is a file writer that writes back (flush: startWriteback, a
// no-op where the system has no such call) every FlushAfter bytes written
// since the last writeback.
type writeback struct {
	f               *os.File
	flush           func(f *os.File, off, n int64) error
	written, synced int64
}

func (w *writeback) Write(p []byte) (int, error) {
	done := 0
	for done < len(p) {
		// A large write (bufio passes one straight through) is cut at each
		// chunk's end, so no more than a chunk is ever left to write back.
		part := p[done:]
		if room := FlushAfter - (w.written - w.synced); int64(len(part)) > room {
			part = part[:room]
		}
		n, err := w.f.Write(part)
		done += n
		w.written += int64(n)
		if err != nil {
			return done, err
		}
		if w.written-w.synced >= FlushAfter {
			// Advisory: a failed writeback leaves the pages dirty, and the
			// final fsync writes them or reports the failure.
			_ = w.flush(w.f, w.synced, w.written-w.synced)
			w.synced = w.written
		}
	}
	return done, nil
}
