package ledger

import (
	"fmt"
	"os"
	"sync/atomic"
)

// blobFault, when set, is returned by every blob write (and the write
// probe) instead of writing: the failpoint of tests for a full or failing
// disk.
var blobFault atomic.Pointer[error]

// SetBlobWriteFault makes every blob write and probe fail with err until
// the returned function is called (tests only).
func SetBlobWriteFault(err error) (restore func()) {
	blobFault.Store(&err)
	return func() { blobFault.Store(nil) }
}

func faultOfBlobs() error {
	if p := blobFault.Load(); p != nil {
		return *p
	}
	return nil
}

// Probe writes, fsyncs and removes a small file in the blob directory: it
// says whether the data directory takes writes again (after ENOSPC or EIO).
func (b *Blobs) Probe() error {
	if err := faultOfBlobs(); err != nil {
		return fmt.Errorf("ledger: write probe: %w", err)
	}
	f, err := os.CreateTemp(b.dir, ".probe-*.tmp")
	if err != nil {
		return fmt.Errorf("ledger: write probe: %w", err)
	}
	defer os.Remove(f.Name())
	defer f.Close()
	if _, err := f.Write(make([]byte, 4096)); err != nil {
		return fmt.Errorf("ledger: write probe: %w", err)
	}
	if err := f.Sync(); err != nil {
		return fmt.Errorf("ledger: write probe: %w", err)
	}
	return nil
}
