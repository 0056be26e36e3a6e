package snapshots

import (
	"bufio"
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strconv"

	"taskledger/internal/durable"
	"taskledger/internal/failpoint"
	"taskledger/ledger"
)

// FormatVersion is the version of the file format described in doc.go.
// (2: the content is projections' own binary encoding, no longer msgpack;
// 3: the checksum is CRC-32C instead of SHA-256; 4: idempotency records
// by id, left encoded at start.)
const FormatVersion = 4

// DirName is the snapshot folder's name inside the data directory.
const DirName = "snapshots"

// Ext is the extension of a snapshot file.
const Ext = ".tlsnap"

// Keep is how many snapshots Prune leaves: the newest and the one before
// it, so a crash while the newest is written never leaves none.
const Keep = 2

var magic = []byte("TLSNAP\r\n")

// checksumSize is the size of the trailing checksum: CRC-32C (Castagnoli)
// of every byte before it, big-endian. It detects damage and hand edits
// (see doc.go: a checksum guards against accidents, not forgery); a
// hardware CRC reads a 400 MB snapshot in a few tens of milliseconds,
// where SHA-256 took half a second.
const checksumSize = 4

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// maxHeader bounds the header length a reader accepts.
const maxHeader = 1 << 16

var nameRE = regexp.MustCompile(`^snapshot-([0-9]{1,20})\.tlsnap$`)

// Header is the metadata of a snapshot file.
type Header struct {
	Format int    `msgpack:"format"`
	Seq    uint64 `msgpack:"seq"`  // the newest event the snapshot covers
	Hash   []byte `msgpack:"hash"` // that event's hash
	At     int64  `msgpack:"at"`   // that event's time, Unix ms
	// Schema is the projection schema version (projections.SchemaVersion).
	Schema int `msgpack:"schema"`
	// Config names the projection configuration the state was derived with
	// (for example the idempotency retention); loading requires it equal.
	Config string `msgpack:"config"`
	// KeyCheck is the claim-token key-check value the covered server-issued
	// claims were verified under, or nil when they were not verified.
	KeyCheck   []byte `msgpack:"key_check"`
	ContentLen uint64 `msgpack:"content_length"`
}

// Snapshot is a header and the projections' canonical bytes.
type Snapshot struct {
	Header
	State []byte
	Path  string // where it was read from or written to
}

// Dir returns the snapshot folder of a data directory.
func Dir(dataDir string) string { return filepath.Join(dataDir, DirName) }

// FileName is the name of the snapshot covering seq.
func FileName(seq uint64) string { return "snapshot-" + strconv.FormatUint(seq, 10) + Ext }

// Write writes s atomically into dir as snapshot-<seq>.tlsnap: a .tmp file
// written and fsynced, renamed, then the directory fsynced. It returns the
// final path.
func Write(dir string, s *Snapshot) (string, error) {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return "", fmt.Errorf("snapshots: create %s: %w", dir, err)
	}
	h := s.Header
	h.Format = FormatVersion
	h.ContentLen = uint64(len(s.State))
	hb, err := ledger.Marshal(&h)
	if err != nil {
		return "", fmt.Errorf("snapshots: encode header: %w", err)
	}
	final := filepath.Join(dir, FileName(h.Seq))
	tmp := final + ".tmp"
	f, err := os.OpenFile(tmp, os.O_CREATE|os.O_TRUNC|os.O_WRONLY, 0o600)
	if err != nil {
		return "", fmt.Errorf("snapshots: create %s: %w", tmp, err)
	}
	ok := false
	defer func() {
		if !ok {
			f.Close()
			os.Remove(tmp)
		}
	}()
	sum := crc32.New(castagnoli)
	bw := bufio.NewWriterSize(durable.Writeback(f), 1<<20)
	w := io.MultiWriter(bw, sum)
	var hlen [4]byte
	binary.BigEndian.PutUint32(hlen[:], uint32(len(hb)))
	for _, part := range [][]byte{magic, hlen[:], hb} {
		if _, err := w.Write(part); err != nil {
			return "", fmt.Errorf("snapshots: write %s: %w", tmp, err)
		}
	}
	half := len(s.State) / 2
	if _, err := w.Write(s.State[:half]); err != nil {
		return "", fmt.Errorf("snapshots: write %s: %w", tmp, err)
	}
	if failpoint.Enabled {
		_ = bw.Flush()                                 // so a kill here leaves a torn .tmp file
		_ = failpoint.Eval(failpoint.SnapshotMidWrite) // kill only
	}
	if _, err := w.Write(s.State[half:]); err != nil {
		return "", fmt.Errorf("snapshots: write %s: %w", tmp, err)
	}
	if _, err := bw.Write(sum.Sum(nil)); err != nil {
		return "", fmt.Errorf("snapshots: write %s: %w", tmp, err)
	}
	if err := bw.Flush(); err != nil {
		return "", fmt.Errorf("snapshots: write %s: %w", tmp, err)
	}
	if err := f.Sync(); err != nil {
		return "", fmt.Errorf("snapshots: sync %s: %w", tmp, err)
	}
	_ = failpoint.Eval(failpoint.SnapshotAfterTmpWrite) // kill only
	if err := f.Close(); err != nil {
		return "", fmt.Errorf("snapshots: close %s: %w", tmp, err)
	}
	if err := os.Rename(tmp, final); err != nil {
		return "", fmt.Errorf("snapshots: rename %s: %w", tmp, err)
	}
	ok = true
	if err := ledger.SyncDir(dir); err != nil {
		return "", err
	}
	s.Path = final
	return final, nil
}

// Read reads and checks one snapshot file: magic, checksum, format and the
// header's agreement with the file name. It does not compare it with the
// log (see Check).
func Read(path string) (*Snapshot, error) {
	b, sum, err := readChecked(path)
	if err != nil {
		return nil, err
	}
	return decode(path, b, sum)
}

// Decode checks and decodes the bytes of a snapshot file read from path.
// The returned State aliases b.
func Decode(path string, b []byte) (*Snapshot, error) {
	var sum uint32
	if len(b) >= checksumSize {
		sum = crc32.Checksum(b[:len(b)-checksumSize], castagnoli)
	}
	return decode(path, b, sum)
}

// decode is Decode with the checksum of b (all but its trailing checksum)
// already computed.
func decode(path string, b []byte, sum uint32) (*Snapshot, error) {
	if len(b) < len(magic)+4+checksumSize || !bytes.Equal(b[:len(magic)], magic) {
		return nil, ErrForeign
	}
	body, want := b[:len(b)-checksumSize], b[len(b)-checksumSize:]
	if sum != binary.BigEndian.Uint32(want) {
		return nil, ErrChecksum
	}
	off := len(magic)
	hlen := int(binary.BigEndian.Uint32(b[off:]))
	off += 4
	if hlen > maxHeader || off+hlen > len(body) {
		return nil, fmt.Errorf("%w: header length %d", ErrFormat, hlen)
	}
	var h Header
	if err := ledger.Unmarshal(body[off:off+hlen], &h); err != nil {
		return nil, fmt.Errorf("%w: header: %v", ErrFormat, err)
	}
	off += hlen
	if h.Format != FormatVersion {
		return nil, fmt.Errorf("%w: format %d, want %d", ErrFormat, h.Format, FormatVersion)
	}
	if h.ContentLen != uint64(len(body)-off) {
		return nil, fmt.Errorf("%w: content length %d, file holds %d", ErrFormat, h.ContentLen, len(body)-off)
	}
	if m := nameRE.FindStringSubmatch(filepath.Base(path)); m != nil && m[1] != strconv.FormatUint(h.Seq, 10) {
		return nil, fmt.Errorf("%w: file name names seq %s, header seq %d", ErrFormat, m[1], h.Seq)
	}
	return &Snapshot{Header: h, State: body[off:], Path: path}, nil
}

// Entry is a snapshot file found in the folder.
type Entry struct {
	Path string
	Seq  uint64 // from the file name
	Size int64
}

// List returns the snapshot files of dir, newest (highest seq) first.
// Temporary files and files with other names are not listed. A missing
// folder has no snapshots.
func List(dir string) ([]Entry, error) {
	ents, err := os.ReadDir(dir)
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("snapshots: list %s: %w", dir, err)
	}
	var out []Entry
	for _, de := range ents {
		m := nameRE.FindStringSubmatch(de.Name())
		if m == nil || !de.Type().IsRegular() {
			continue
		}
		seq, err := strconv.ParseUint(m[1], 10, 64)
		if err != nil {
			continue
		}
		var size int64
		if fi, err := de.Info(); err == nil {
			size = fi.Size()
		}
		out = append(out, Entry{Path: filepath.Join(dir, de.Name()), Seq: seq, Size: size})
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Seq > out[j].Seq })
	return out, nil
}

// Prune removes every snapshot but the newest keep, and leftover .tmp
// files of snapshots older than the newest.
func Prune(dir string, keep int) error {
	list, err := List(dir)
	if err != nil {
		return err
	}
	var first error
	for i, e := range list {
		if i >= keep {
			if err := os.Remove(e.Path); err != nil && first == nil {
				first = fmt.Errorf("snapshots: prune: %w", err)
			}
		}
	}
	if len(list) > 0 {
		tmps, _ := filepath.Glob(filepath.Join(dir, "snapshot-*"+Ext+".tmp"))
		for _, t := range tmps {
			m := nameRE.FindStringSubmatch(filepath.Base(t[:len(t)-len(".tmp")]))
			if m == nil {
				continue
			}
			if seq, err := strconv.ParseUint(m[1], 10, 64); err == nil && seq <= list[0].Seq {
				os.Remove(t)
			}
		}
	}
	return first
}

// Log is the read side of the log that Check compares a snapshot with.
type Log interface {
	Head() (ledger.Head, error)
	Range(after uint64, fn func(*ledger.Event) error) error
}

// Want is what a loadable snapshot must have been derived with.
type Want struct {
	Schema int    // projections.SchemaVersion
	Config string // the projection configuration's name
}

// Check compares a snapshot's header with what the loader wants and with
// the log: same schema and configuration, seq not beyond the head, and the
// covered hash equal to the hash of the event at that seq.
func Check(s *Snapshot, want Want, log Log) error {
	if s.Schema != want.Schema || s.Config != want.Config {
		return fmt.Errorf("%w: schema %d config %q, want schema %d config %q", ErrSchema, s.Schema, s.Config,
			want.Schema, want.Config)
	}
	head, err := log.Head()
	if err != nil {
		return err
	}
	if s.Seq > head.Seq {
		return fmt.Errorf("%w: covers seq %d, the log ends at %d", ErrBeyondHead, s.Seq, head.Seq)
	}
	hash, err := hashAt(log, s.Seq)
	if err != nil {
		return err
	}
	if !bytes.Equal(hash, s.Hash) {
		return fmt.Errorf("%w (seq %d)", ErrHashMismatch, s.Seq)
	}
	return nil
}

// hashAt returns the hash of the event at seq (the zero hash for seq 0).
func hashAt(log Log, seq uint64) ([]byte, error) {
	if seq == 0 {
		return ledger.ZeroHash, nil
	}
	var hash []byte
	err := log.Range(seq-1, func(e *ledger.Event) error {
		if e.Seq == seq {
			hash = e.Hash
		}
		return ledger.ErrStop
	})
	if err != nil {
		return nil, err
	}
	if hash == nil {
		return nil, fmt.Errorf("%w: no event at seq %d", ErrHashMismatch, seq)
	}
	return hash, nil
}

// Refusal is a snapshot file that loading did not trust, and why.
type Refusal struct {
	Path string
	Seq  uint64
	Err  error
}

func (r Refusal) Error() string { return fmt.Sprintf("%s: %v", filepath.Base(r.Path), r.Err) }

// LoadNewest returns the newest snapshot in dir that passes Read and
// Check, and every newer file it refused on the way (nil, refusals, nil
// when none is usable). Only an error reading the log is returned as an
// error: a bad snapshot is never fatal.
func LoadNewest(dir string, want Want, log Log) (*Snapshot, []Refusal, error) {
	list, err := List(dir)
	if err != nil {
		return nil, nil, err
	}
	var refused []Refusal
	for _, e := range list {
		s, err := Read(e.Path)
		if err == nil {
			err = Check(s, want, log)
		}
		if err == nil {
			return s, refused, nil
		}
		if !refusable(err) {
			return nil, refused, err
		}
		refused = append(refused, Refusal{Path: e.Path, Seq: e.Seq, Err: err})
	}
	return nil, refused, nil
}

// refusable reports whether err is about the snapshot (refuse it and go
// on) rather than about reading the log.
func refusable(err error) bool {
	for _, e := range []error{ErrForeign, ErrChecksum, ErrFormat, ErrSchema, ErrBeyondHead, ErrHashMismatch} {
		if errors.Is(err, e) {
			return true
		}
	}
	var pe *os.PathError
	return errors.As(err, &pe) // unreadable file
}
