package ledger

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"regexp"

	"taskledger/internal/failpoint"
)

// Blobs is the content-addressed store beside the log: files under
// DATA/blobs named by the SHA-256 of their content. A blob is written and
// fsynced (file and directory) before the event that references it is
// appended; a blob no event references is harmless garbage.
type Blobs struct{ dir string }

// BlobDir is the blob folder's name inside the data directory.
const BlobDir = "blobs"

var blobName = regexp.MustCompile(`^[0-9a-f]{64}$`)

// OpenBlobs returns the blob store of a data directory.
func OpenBlobs(dataDir string) (*Blobs, error) {
	dir := filepath.Join(dataDir, BlobDir)
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, fmt.Errorf("ledger: blob directory: %w", err)
	}
	return &Blobs{dir: dir}, nil
}

// Put stores data durably and returns its SHA-256 (hex).
func (b *Blobs) Put(data []byte) (string, error) {
	sum := sha256.Sum256(data)
	name := hex.EncodeToString(sum[:])
	final := filepath.Join(b.dir, name)
	if st, err := os.Stat(final); err == nil && st.Size() == int64(len(data)) {
		// An earlier Put may have renamed it and then failed to sync the
		// directory: sync again before the caller appends its event.
		if err := SyncDir(b.dir); err != nil {
			return "", err
		}
		return name, nil
	}
	if err := failpoint.Eval(failpoint.BlobWrite); err != nil {
		return "", fmt.Errorf("ledger: blob write: %w", err)
	}
	f, err := os.CreateTemp(b.dir, name+".*.tmp")
	if err != nil {
		return "", fmt.Errorf("ledger: blob: %w", err)
	}
	tmp := f.Name()
	defer os.Remove(tmp)
	if _, err := f.Write(data); err != nil {
		f.Close()
		return "", fmt.Errorf("ledger: blob write: %w", err)
	}
	if err := f.Sync(); err != nil {
		f.Close()
		return "", fmt.Errorf("ledger: blob sync: %w", err)
	}
	if err := f.Close(); err != nil {
		return "", fmt.Errorf("ledger: blob close: %w", err)
	}
	if err := os.Rename(tmp, final); err != nil {
		return "", fmt.Errorf("ledger: blob rename: %w", err)
	}
	if err := SyncDir(b.dir); err != nil {
		return "", err
	}
	return name, nil
}

// Get returns the blob named by sha (hex).
func (b *Blobs) Get(sha string) ([]byte, error) {
	if !blobName.MatchString(sha) {
		return nil, ErrNotFound
	}
	data, err := os.ReadFile(filepath.Join(b.dir, sha))
	if errors.Is(err, os.ErrNotExist) {
		return nil, ErrNotFound
	}
	if err != nil {
		return nil, err
	}
	// Served content is re-checked: a damaged blob is never served.
	if err := checkBlob(sha, data); err != nil {
		return nil, err
	}
	return data, nil
}

// SyncDir fsyncs a directory so a rename in it is durable.
func SyncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return fmt.Errorf("ledger: sync dir: %w", err)
	}
	defer d.Close()
	if err := d.Sync(); err != nil {
		return fmt.Errorf("ledger: sync dir: %w", err)
	}
	return nil
}
