package ledger

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"sync"
	"sync/atomic"
)

// Blobs is the content-addressed store beside the log: files under
// DATA/blobs named by the SHA-256 of their content. A blob is written and
// fsynced (file and directory) before the event that references it is
// appended; a blob no event references is harmless garbage.
type Blobs struct {
	dir  string
	mu   sync.Mutex      // pins, and the renames and removals they guard
	pins map[string]*pin // blob name → writers between rename and release
	hook atomic.Pointer[func(stage string)]
	// shared, when set, is the store every node of a cluster reads: a
	// committed blob is put there too before its event can be appended,
	// and a blob missing here is read from there.
	shared BlobStore
}

// SetShared makes the folder a node-local copy of shared (a cluster's
// object store): Commit and Put also store each blob there, Get reads
// one missing here from there. Call it before the first write.
func (b *Blobs) SetShared(shared BlobStore) { b.shared = shared }

// share stores the committed blob sha in the shared store, if any.
func (b *Blobs) share(sha string) error {
	if b.shared == nil {
		return nil
	}
	data, err := os.ReadFile(filepath.Join(b.dir, sha))
	if err != nil {
		return fmt.Errorf("ledger: blob share: %w", err)
	}
	if _, err := b.shared.Put(data); err != nil {
		return fmt.Errorf("ledger: blob share: %w", err)
	}
	return nil
}

// BlobDir is the blob folder's name inside the data directory.
const BlobDir = "blobs"

var blobName = regexp.MustCompile(`^[0-9a-f]{64}$`)

// OpenBlobs returns the blob store of a data directory.
func OpenBlobs(dataDir string) (*Blobs, error) {
	dir := filepath.Join(dataDir, BlobDir)
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, fmt.Errorf("ledger: blob directory: %w", err)
	}
	return &Blobs{dir: dir, pins: map[string]*pin{}}, nil
}

// Put stores data durably and returns its SHA-256 (hex). The blob is
// kept whatever happens to the event that references it (an unreferenced
// one is collected at the next start).
func (b *Blobs) Put(data []byte) (string, error) {
	u, err := b.Create()
	if err != nil {
		return "", err
	}
	defer u.Abort()
	if _, err := u.Write(data); err != nil {
		return "", err
	}
	ref, err := u.Commit()
	if err != nil {
		return "", err
	}
	_, err = ref.Release(true)
	return ref.SHA256(), err
}

// Get returns the blob named by sha (hex).
func (b *Blobs) Get(sha string) ([]byte, error) {
	if !blobName.MatchString(sha) {
		return nil, ErrNotFound
	}
	data, err := os.ReadFile(filepath.Join(b.dir, sha))
	if errors.Is(err, os.ErrNotExist) && b.shared != nil {
		return b.shared.Get(sha) // checked against its name there
	}
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
