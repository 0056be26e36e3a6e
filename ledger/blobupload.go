package ledger

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"hash"
	"os"
	"path/filepath"
	"strings"

	"taskledger/internal/failpoint"
)

// uploadPattern names the temporary file of a blob being written (its
// SHA-256 is known only at the end); every "*.tmp" in the blob directory
// is a write that never finished, removed by Collect.
const uploadPattern = ".upload-*.tmp"

// pin counts the writers holding one blob name between their rename and
// the end of their command. fresh: the blob did not exist when the first
// of them renamed it into place (so no committed event can reference it
// but one of theirs); kept: one of them may have committed an event that
// references it.
type pin struct {
	n     int
	fresh bool
	kept  bool
}

// Upload is a blob being written: the bytes go to a temporary file in the
// blob directory, hashed as they come; Commit fsyncs and renames it to its
// content address, Abort removes it. An Upload is used by one goroutine.
type Upload struct {
	b    *Blobs
	f    *os.File
	h    hash.Hash
	n    int64
	done bool
}

// Create starts a blob write.
func (b *Blobs) Create() (*Upload, error) {
	if err := failpoint.Eval(failpoint.BlobWrite); err != nil {
		return nil, fmt.Errorf("ledger: blob write: %w", err)
	}
	f, err := os.CreateTemp(b.dir, uploadPattern)
	if err != nil {
		return nil, fmt.Errorf("ledger: blob: %w", err)
	}
	b.tell(BlobCreated)
	return &Upload{b: b, f: f, h: sha256.New()}, nil
}

// Write appends p to the blob.
func (u *Upload) Write(p []byte) (int, error) {
	if err := failpoint.Eval(failpoint.BlobWrite); err != nil {
		return 0, fmt.Errorf("ledger: blob write: %w", err)
	}
	n, err := u.f.Write(p)
	u.h.Write(p[:n])
	u.n += int64(n)
	if err != nil {
		return n, fmt.Errorf("ledger: blob write: %w", err)
	}
	return n, nil
}

// Size is the number of bytes written so far.
func (u *Upload) Size() int64 { return u.n }

// Abort removes the temporary file; after Commit it does nothing.
func (u *Upload) Abort() {
	if u.done {
		return
	}
	u.done = true
	u.f.Close()
	os.Remove(u.f.Name())
	u.b.tell(BlobAborted)
}

// Commit fsyncs the blob, renames it to its SHA-256 and fsyncs the
// directory (when a blob of that name and size already exists, the
// temporary file is removed instead). The returned BlobRef pins the name
// until Release: the caller appends the event that references the blob,
// then releases it saying whether that event may have been committed.
// On error the temporary file is removed.
func (u *Upload) Commit() (*BlobRef, error) {
	ref, err := u.commit()
	if err == nil {
		u.b.tell(BlobRenamed)
	}
	if err == nil {
		if err = u.b.share(ref.sha); err != nil {
			_, _ = ref.Release(false)
			return nil, err
		}
	}
	return ref, err
}

func (u *Upload) commit() (*BlobRef, error) {
	if u.done {
		return nil, errors.New("ledger: blob upload already finished")
	}
	defer u.Abort()
	if err := failpoint.Eval(failpoint.BlobWrite); err != nil {
		return nil, fmt.Errorf("ledger: blob sync: %w", err)
	}
	if err := u.f.Sync(); err != nil {
		return nil, fmt.Errorf("ledger: blob sync: %w", err)
	}
	if err := u.f.Close(); err != nil {
		return nil, fmt.Errorf("ledger: blob close: %w", err)
	}
	name := hex.EncodeToString(u.h.Sum(nil))
	final := filepath.Join(u.b.dir, name)
	b := u.b
	b.mu.Lock()
	defer b.mu.Unlock()
	st, statErr := os.Stat(final)
	exists := statErr == nil && st.Size() == u.n
	if !exists {
		if err := os.Rename(u.f.Name(), final); err != nil {
			return nil, fmt.Errorf("ledger: blob rename: %w", err)
		}
		u.done = true
	}
	// Synced also when the blob existed: an earlier writer may have renamed
	// it and failed before its directory sync.
	if err := SyncDir(b.dir); err != nil {
		if !exists {
			// Not durable: nothing may reference it; a pin of another
			// writer keeps it for that writer.
			if _, pinned := b.pins[name]; !pinned {
				os.Remove(final)
			}
		}
		return nil, err
	}
	p := b.pins[name]
	if p == nil {
		// A blob that was not there (or was damaged: an event may name
		// it, so not fresh) before this writer.
		p = &pin{fresh: errors.Is(statErr, os.ErrNotExist)}
		b.pins[name] = p
	}
	p.n++
	return &BlobRef{b: b, sha: name, size: u.n}, nil
}

// BlobRef is a committed blob pinned by one writer.
type BlobRef struct {
	b        *Blobs
	sha      string
	size     int64
	released bool
}

// SHA256 is the blob's name (hex).
func (r *BlobRef) SHA256() string { return r.sha }

// Size is the blob's size in bytes.
func (r *BlobRef) Size() int64 { return r.size }

// Release ends the writer's pin. kept says the event referencing the blob
// may have been committed (accepted, or an outcome not known); a writer
// refused for sure passes false. The last pin of a blob that no writer
// kept and that did not exist before them removes the file (removed
// reports it): a blob that existed before, or that any of them kept, stays.
func (r *BlobRef) Release(kept bool) (removed bool, err error) {
	removed, err = r.release(kept)
	if removed {
		r.b.tell(BlobRemoved)
	}
	return removed, err
}

func (r *BlobRef) release(kept bool) (removed bool, err error) {
	if r.released {
		return false, nil
	}
	r.released = true
	b := r.b
	b.mu.Lock()
	defer b.mu.Unlock()
	p := b.pins[r.sha]
	if p == nil {
		return false, nil
	}
	p.kept = p.kept || kept
	p.n--
	if p.n > 0 {
		return false, nil
	}
	delete(b.pins, r.sha)
	if !p.fresh || p.kept {
		return false, nil
	}
	if err := os.Remove(filepath.Join(b.dir, r.sha)); err != nil && !errors.Is(err, os.ErrNotExist) {
		return false, fmt.Errorf("ledger: remove refused blob: %w", err)
	}
	return true, SyncDir(b.dir)
}

// Pinned reports whether a write of the blob sha is between its rename
// and its release here (its event may be appended now).
func (b *Blobs) Pinned(sha string) bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	_, ok := b.pins[sha]
	return ok
}

// Collected is what Collect removed.
type Collected struct {
	Temporary    int   // temporary files of writes that never finished
	Unreferenced int   // blobs no committed event references
	Bytes        int64 // their total size
}

// Collect removes the temporary files of unfinished writes and every blob
// referenced reports false for; other files are left alone. It runs at
// start, before the server takes requests (pinned blobs are skipped).
func (b *Blobs) Collect(referenced func(sha string) (bool, error)) (Collected, error) {
	var c Collected
	entries, err := os.ReadDir(b.dir)
	if err != nil {
		return c, fmt.Errorf("ledger: list blobs: %w", err)
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	for _, e := range entries {
		name := e.Name()
		if e.IsDir() {
			continue
		}
		tmp := strings.HasSuffix(name, ".tmp")
		if !tmp {
			if !blobName.MatchString(name) {
				continue
			}
			if _, pinned := b.pins[name]; pinned {
				continue
			}
			ok, err := referenced(name)
			if err != nil {
				return c, err
			}
			if ok {
				continue
			}
		}
		var size int64
		if info, err := e.Info(); err == nil {
			size = info.Size()
		}
		if err := os.Remove(filepath.Join(b.dir, name)); err != nil {
			if errors.Is(err, os.ErrNotExist) {
				continue
			}
			return c, fmt.Errorf("ledger: remove orphaned blob: %w", err)
		}
		if tmp {
			c.Temporary++
		} else {
			c.Unreferenced++
		}
		c.Bytes += size
	}
	if c.Temporary+c.Unreferenced > 0 {
		return c, SyncDir(b.dir)
	}
	return c, nil
}

// Blob-write stages told to the hook of SetHook.
const (
	// BlobCreated: an upload's temporary file exists.
	BlobCreated = "created"
	// BlobAborted: an upload's temporary file was removed.
	BlobAborted = "aborted"
	// BlobRenamed: an upload took its content address (Commit).
	BlobRenamed = "renamed"
	// BlobRemoved: a refused upload's blob was removed (Release).
	BlobRemoved = "removed"
)

func (b *Blobs) tell(stage string) {
	if h := b.hook.Load(); h != nil {
		(*h)(stage)
	}
}

// SetHook calls fn at each stage of a blob write (tests that hold an
// upload in flight); nil removes it.
func (b *Blobs) SetHook(fn func(stage string)) {
	if fn == nil {
		b.hook.Store(nil)
		return
	}
	b.hook.Store(&fn)
}
