package durable

import (
	"os"

	"golang.org/x/sys/unix"
)

// startWriteback writes the file's dirty pages in [off, off+n) to the disk
// and waits for them (sync_file_range: data only, no metadata, no cache
// flush — not durability, which the final fsync gives).
func startWriteback(f *os.File, off, n int64) error {
	return unix.SyncFileRange(int(f.Fd()), off, n,
		unix.SYNC_FILE_RANGE_WAIT_BEFORE|unix.SYNC_FILE_RANGE_WRITE|unix.SYNC_FILE_RANGE_WAIT_AFTER)
}
