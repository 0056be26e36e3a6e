// Package durable writes files beside the log so that a crash or a power
// cut cannot tear them, and large ones so that they do not stall the log.
//
// WriteFile writes the small files beside the log (the head record,
// the initial admin token, the checkpoint key) so that a power cut leaves
// either the old or the new content whole, never a torn or empty file:
// the content goes to NAME.tmp, which is fsynced, renamed over NAME, and
// the directory fsynced so that the rename itself survives the cut.
// Writeback is for the large ones (snapshots, backup archives): it writes
// them back to the disk a chunk at a time as they are written, so their
// final fsync does not put them in the disk's queue all at once.
//
// A failpoint sits after each step (internal/failpoint, build tag
// failpoints): with an error action the write stops there and returns the
// error, leaving the files as a cut at that moment would find them before
// the page cache is lost; tests then tear what was not yet fsynced.
package durable

import (
	"fmt"
	"os"
	"path/filepath"

	"taskledger/internal/failpoint"
)

// TmpSuffix is appended to the final name for the file being written.
const TmpSuffix = ".tmp"

// WriteFile replaces path with data (mode perm) durably: when it returns
// nil the new content is on disk under path; when a cut interrupts it,
// path holds its old content (or does not exist if it did not before) and
// at most a stale path+TmpSuffix is left, which the next WriteFile
// replaces.
func WriteFile(path string, data []byte, perm os.FileMode) error {
	tmp := path + TmpSuffix
	f, err := os.OpenFile(tmp, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, perm)
	if err != nil {
		return fmt.Errorf("durable: create %s: %w", filepath.Base(tmp), err)
	}
	ok := false
	defer func() {
		if !ok {
			_ = f.Close()
		}
	}()
	if _, err := f.Write(data); err != nil {
		return fmt.Errorf("durable: write %s: %w", filepath.Base(tmp), err)
	}
	if err := failpoint.Eval(failpoint.SideFileWritten); err != nil {
		return err
	}
	if err := f.Sync(); err != nil {
		return fmt.Errorf("durable: sync %s: %w", filepath.Base(tmp), err)
	}
	ok = true
	if err := f.Close(); err != nil {
		return fmt.Errorf("durable: close %s: %w", filepath.Base(tmp), err)
	}
	if err := failpoint.Eval(failpoint.SideFileSynced); err != nil {
		return err
	}
	if err := os.Rename(tmp, path); err != nil {
		return fmt.Errorf("durable: rename %s: %w", filepath.Base(tmp), err)
	}
	if err := failpoint.Eval(failpoint.SideFileRenamed); err != nil {
		return err
	}
	return SyncDir(filepath.Dir(path))
}

// SyncDir fsyncs a directory, so that the names created, renamed or
// removed in it survive a power cut.
func SyncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return fmt.Errorf("durable: sync dir: %w", err)
	}
	defer d.Close()
	if err := d.Sync(); err != nil {
		return fmt.Errorf("durable: sync dir: %w", err)
	}
	return nil
}
