package ledger

import (
	"fmt"
	"os"

	"taskledger/internal/failpoint"
)

// Probe writes, fsyncs and removes a small file in the blob directory: it
// says whether the data directory takes writes again (after ENOSPC or EIO).
func (b *Blobs) Probe() error {
	if err := failpoint.Eval(failpoint.BlobWrite); err != nil {
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
