package backup

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"

	"taskledger/internal/durable"
)

// FilePrefix and FileExt name the archives a schedule writes:
// taskledger-backup-<head seq, 20 digits>.tar, so that name order is head
// order and one head is backed up once.
const (
	FilePrefix = "taskledger-backup-"
	FileExt    = ".tar"
)

// FileName is the scheduled archive's name for a head seq.
func FileName(seq uint64) string { return fmt.Sprintf("%s%020d%s", FilePrefix, seq, FileExt) }

// WriteFile writes an archive into dir through write, which returns the
// name to give it: into a partial file, fsynced, renamed to that name, the
// directory fsynced, so that an archive exists only complete. A failure
// removes the partial file.
func WriteFile(dir string, write func(io.Writer) (string, error)) (string, error) {
	f, err := os.CreateTemp(dir, FilePrefix+"*"+FileExt+".partial")
	if err != nil {
		return "", fmt.Errorf("backup: %w", err)
	}
	tmp := f.Name()
	bw := bufio.NewWriterSize(durable.Writeback(f), 1<<20)
	name, err := write(bw)
	if err == nil {
		err = bw.Flush()
	}
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	path := filepath.Join(dir, name)
	if err == nil {
		err = os.Rename(tmp, path)
	}
	if err != nil {
		os.Remove(tmp)
		return "", err
	}
	return path, syncDir(dir)
}

// Newest is the head seq of dir's newest scheduled archive (false: none).
func Newest(dir string) (uint64, bool) {
	ents, err := os.ReadDir(dir)
	if err != nil {
		return 0, false
	}
	var seq uint64
	found := false
	for _, e := range ents {
		if n, ok := seqOf(e.Name()); ok && (!found || n > seq) {
			seq, found = n, true
		}
	}
	return seq, found
}

func syncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return fmt.Errorf("backup: %w", err)
	}
	defer d.Close()
	return d.Sync()
}

// Prune removes the scheduled archives of dir beyond the keep newest (by
// head seq) and any partial file a crash left; it returns what it removed.
func Prune(dir string, keep int) ([]string, error) {
	ents, err := os.ReadDir(dir)
	if err != nil {
		return nil, fmt.Errorf("backup: %w", err)
	}
	var archives, removed []string
	var errs []error
	for _, e := range ents {
		name := e.Name()
		if !strings.HasPrefix(name, FilePrefix) {
			continue
		}
		switch {
		case strings.HasSuffix(name, FileExt+".partial"):
			removed = append(removed, name)
		default:
			if _, ok := seqOf(name); ok {
				archives = append(archives, name)
			}
		}
	}
	sort.Strings(archives)
	if len(archives) > keep {
		removed = append(removed, archives[:len(archives)-keep]...)
	}
	for _, name := range removed {
		if err := os.Remove(filepath.Join(dir, name)); err != nil && !errors.Is(err, os.ErrNotExist) {
			errs = append(errs, err)
		}
	}
	return removed, errors.Join(errs...)
}

// seqOf reads the head seq of a scheduled archive's name.
func seqOf(name string) (uint64, bool) {
	digits, okPrefix := strings.CutPrefix(name, FilePrefix)
	digits, okSuffix := strings.CutSuffix(digits, FileExt)
	if !okPrefix || !okSuffix || len(digits) != 20 {
		return 0, false
	}
	n, err := strconv.ParseUint(digits, 10, 64)
	return n, err == nil
}
