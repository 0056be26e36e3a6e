package ledger

import (
	"encoding/binary"
	"errors"
	"fmt"
	"hash/fnv"
	"io"
	"os"
)

// ErrTruncated is a log file shorter than its own meta pages say: the end
// of the file (committed pages) is missing.
var ErrTruncated = errors.New("ledger: taskledger.db is truncated")

// ErrDamaged is a log file whose meta pages cannot be read.
var ErrDamaged = errors.New("ledger: taskledger.db is damaged")

// ErrEmptyFile is a log file of 0 bytes.
var ErrEmptyFile = errors.New("ledger: taskledger.db is empty (0 bytes)")

// bbolt's file layout: pages 0 and 1 are meta pages; a page starts with a
// 16-byte header (id, flags, count, overflow), a meta page continues with
// magic, version, page size, flags, root bucket (root page, sequence),
// freelist page, high-water mark (page count), txid, and an FNV-64a
// checksum of the meta fields before it.
const (
	boltMagic      = 0xED0CDAED
	boltPageHeader = 16
	boltMetaSize   = 64
	boltMinPage    = 512
)

type boltMeta struct {
	pageSize uint32
	pgid     uint64 // high-water mark: pages in use
	txid     uint64
}

func readBoltMeta(b []byte) (boltMeta, bool) {
	if len(b) < boltPageHeader+boltMetaSize {
		return boltMeta{}, false
	}
	m := b[boltPageHeader : boltPageHeader+boltMetaSize]
	le := binary.LittleEndian
	if le.Uint32(m[0:]) != boltMagic {
		return boltMeta{}, false
	}
	h := fnv.New64a()
	h.Write(m[:56])
	if h.Sum64() != le.Uint64(m[56:]) {
		return boltMeta{}, false
	}
	return boltMeta{pageSize: le.Uint32(m[8:]), pgid: le.Uint64(m[40:]), txid: le.Uint64(m[48:])}, true
}

// CheckFile checks the log file at path before bbolt opens it: not empty,
// a valid meta page, and at least as long as the high-water mark of every
// valid meta page (bbolt would otherwise fault reading past the end). A missing file is not
// checked (nil).
func CheckFile(path string) error {
	f, err := os.Open(path)
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("ledger: open %s: %w", FileName, err)
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return fmt.Errorf("ledger: stat %s: %w", FileName, err)
	}
	size := fi.Size()
	if size == 0 {
		return ErrEmptyFile
	}
	head := make([]byte, boltPageHeader+boltMetaSize)
	if _, err := io.ReadFull(f, head); err != nil {
		return fmt.Errorf("%w: %d bytes, shorter than a meta page", ErrTruncated, size)
	}
	m0, ok0 := readBoltMeta(head)
	// The second meta page sits one page further; its page size comes from
	// the first when that is valid, else every plausible size is tried.
	sizes := []uint32{m0.pageSize}
	if !ok0 {
		sizes = []uint32{4096, 512, 1024, 2048, 8192, 16384, 32768, 65536}
	}
	var m1 boltMeta
	ok1 := false
	for _, ps := range sizes {
		if ps < boltMinPage {
			continue
		}
		b := make([]byte, boltPageHeader+boltMetaSize)
		if _, err := f.ReadAt(b, int64(ps)); err == nil {
			if m1, ok1 = readBoltMeta(b); ok1 {
				break
			}
		}
	}
	if !ok0 && !ok1 {
		return fmt.Errorf("%w: neither meta page is valid (%d bytes)", ErrDamaged, size)
	}
	for _, m := range []struct {
		meta boltMeta
		ok   bool
	}{{m0, ok0}, {m1, ok1}} {
		if !m.ok {
			continue
		}
		need := int64(m.meta.pgid) * int64(m.meta.pageSize)
		if size < need {
			return fmt.Errorf("%w: %d bytes, but its meta page (transaction %d) covers %d pages of %d bytes (%d bytes)",
				ErrTruncated, size, m.meta.txid, m.meta.pgid, m.meta.pageSize, need)
		}
	}
	// One invalid meta page alone is bbolt's torn-commit case: that commit
	// was never acknowledged (the meta write is the commit).
	return nil
}

// checkMetaPages reports a meta page of the file at path that is not a
// valid bbolt meta page (zeroed, torn or edited), naming it. bbolt opens
// such a file on its other meta page, but its consistency check asserts on
// the damaged one (a panic) instead of saying which it is.
func checkMetaPages(path string) error {
	f, err := os.Open(path)
	if err != nil {
		return fmt.Errorf("ledger: open %s: %w", FileName, err)
	}
	defer f.Close()
	read := func(off int64) (boltMeta, bool) {
		b := make([]byte, boltPageHeader+boltMetaSize)
		if _, err := f.ReadAt(b, off); err != nil {
			return boltMeta{}, false
		}
		return readBoltMeta(b)
	}
	m0, ok0 := read(0)
	ps := int64(m0.pageSize)
	if !ok0 {
		ps = int64(os.Getpagesize())
		for _, try := range []int64{ps, 4096, 512, 1024, 2048, 8192, 16384, 32768, 65536} {
			if m1, ok := read(try); ok {
				ps = int64(m1.pageSize)
				break
			}
		}
	}
	m1, ok1 := read(ps)
	switch {
	case !ok0 && !ok1:
		return fmt.Errorf("%w: neither meta page is valid", ErrDamaged)
	case !ok0:
		return fmt.Errorf("%w: meta page 0 (bytes 0–%d) is not a valid bbolt meta page (zeroed or damaged); "+
			"the file opens on meta page 1 (transaction %d)", ErrDamaged, ps-1, m1.txid)
	case !ok1:
		return fmt.Errorf("%w: meta page 1 (bytes %d–%d) is not a valid bbolt meta page (zeroed or damaged); "+
			"the file opens on meta page 0 (transaction %d)", ErrDamaged, ps, 2*ps-1, m0.txid)
	}
	return nil
}
