package ledger

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"path/filepath"
)

// ErrBlobDamaged is a blob whose content no longer hashes to its name, or
// whose size is not the recorded one.
var ErrBlobDamaged = errors.New("ledger: blob is damaged")

// checkBlob compares data with the SHA-256 (hex) it is named by.
func checkBlob(sha string, data []byte) error {
	sum := sha256.Sum256(data)
	if hex.EncodeToString(sum[:]) != sha {
		return fmt.Errorf("%w: %s does not hash to its name", ErrBlobDamaged, sha)
	}
	return nil
}

// CheckBlob checks the blob sha of the data directory: present, of the
// recorded size, and hashing to its name.
func CheckBlob(dataDir, sha string, size int64) error {
	if !blobName.MatchString(sha) {
		return fmt.Errorf("%w: %q is not a blob name", ErrBlobDamaged, sha)
	}
	data, err := os.ReadFile(filepath.Join(dataDir, BlobDir, sha))
	if errors.Is(err, os.ErrNotExist) {
		return fmt.Errorf("%w: %s is missing", ErrBlobDamaged, sha)
	}
	if err != nil {
		return fmt.Errorf("ledger: read blob %s: %w", sha, err)
	}
	if int64(len(data)) != size {
		return fmt.Errorf("%w: %s holds %d bytes, the log records %d", ErrBlobDamaged, sha, len(data), size)
	}
	return checkBlob(sha, data)
}
