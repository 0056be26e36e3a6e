package node

import (
	"bytes"
	"errors"
	"fmt"
	"hash/crc32"
	"os"
	"path/filepath"
	"strconv"

	"taskledger/internal/durable"
	"taskledger/ledger"
)

// ErrChain is an event read at start whose hash chain does not hold.
var ErrChain = errors.New("the log's hash chain is broken")

// ErrLogBehindHead is a log that ends before the head of its last
// acknowledged commit.
var ErrLogBehindHead = errors.New("the log ends before the last acknowledged commit")

// checkChain checks every event after from: dense seq, prev_hash chaining
// from the event before (from itself: the snapshot's seq and hash, or the
// genesis), and each event's hash recomputed from its content. It stops at
// the first bad seq and checks that the log's head record is the last
// event.
func checkChain(store ledger.Backend, from ledger.Head) error {
	prev := from
	dec := ledger.NewTransientDecoder() // e lives for the call; its Hash is a copy
	err := store.RangeRaw(from.Seq, func(seq uint64, raw []byte) error {
		if seq != prev.Seq+1 {
			return fmt.Errorf("%w at seq %d: the next stored event is %d", ErrChain, prev.Seq+1, seq)
		}
		e, err := dec.Decode(raw)
		if err != nil {
			return fmt.Errorf("%w at seq %d: %v", ErrChain, seq, err)
		}
		if e.Seq != seq || !bytes.Equal(e.PrevHash, prev.Hash) {
			return fmt.Errorf("%w at seq %d: prev_hash does not chain from seq %d", ErrChain, seq, prev.Seq)
		}
		if !ledger.StoredHashHolds(raw, e) { // else the hash is of the bytes read: no encoding again
			h, err := ledger.ComputeHash(e)
			if err != nil || !bytes.Equal(h, e.Hash) {
				return fmt.Errorf("%w at seq %d: the event's hash does not match its content (edited?)", ErrChain, seq)
			}
		}
		prev = ledger.Head{Seq: seq, Hash: e.Hash, At: e.At}
		return nil
	})
	if err != nil {
		return err
	}
	head, err := store.Head()
	if err != nil {
		return err
	}
	if head.Seq != prev.Seq || !bytes.Equal(head.Hash, prev.Hash) {
		return fmt.Errorf("%w: the head record names seq %d, the events end at seq %d", ErrChain, head.Seq, prev.Seq)
	}
	return nil
}

// HeadFile holds the (seq, hash) of the last committed batch beside the
// log, outside the bbolt file: if bbolt falls back to an older meta page
// (the newest one damaged), the log ends before it and start is refused.
// It is written after each commit (after the log's fsync, so it never
// names a commit the log does not hold), in place and not fsynced: after a
// power cut it may name an older commit, which refuses nothing, or be
// torn. The record carries a CRC-32C of its text, so a torn record (old
// and new bytes mixed, zeros, a cut-short file) is told apart from one the
// log does not reach: a torn record names nothing (start goes on, and
// rewrites it), a whole one that the log does not reach refuses the start.
// At each start it is replaced whole (internal/durable).
const HeadFile = "head"

type headFile struct {
	f *os.File
}

// headRecordLen is the record's fixed width: "%020d %064x %08x\n".
const headRecordLen = 20 + 1 + 64 + 1 + 8 + 1

var headCRC = crc32.MakeTable(crc32.Castagnoli)

// headRecord is fixed width so that each write overwrites the last.
func headRecord(h ledger.Head) []byte {
	text := fmt.Appendf(nil, "%020d %064x", h.Seq, h.Hash)
	return fmt.Appendf(text, " %08x\n", crc32.Checksum(text, headCRC))
}

// parseHeadRecord reads a record; ok is false for a torn, legacy (no
// checksum) or foreign one, which names nothing.
func parseHeadRecord(raw []byte) (seq uint64, hash string, ok bool) {
	if len(raw) != headRecordLen || raw[20] != ' ' || raw[85] != ' ' || raw[94] != '\n' {
		return 0, "", false
	}
	sum, err := strconv.ParseUint(string(raw[86:94]), 16, 32)
	if err != nil || uint32(sum) != crc32.Checksum(raw[:85], headCRC) {
		return 0, "", false
	}
	seq, err = strconv.ParseUint(string(raw[:20]), 10, 64)
	if err != nil {
		return 0, "", false
	}
	return seq, string(raw[21:85]), true
}

// CheckHeadFile is what verify adds to the log's own checks: the log
// holds the last commit recorded beside it in DATA/head (see HeadFile).
func CheckHeadFile(dataDir string, store *ledger.Store) error {
	head, err := store.Head()
	if err != nil {
		return err
	}
	return checkHeadFile(dataDir, store, head)
}

// checkHeadFile refuses a log that ends before the recorded head, or holds
// another event at its seq. A missing or torn record names nothing.
func checkHeadFile(dataDir string, store *ledger.Store, head ledger.Head) error {
	raw, err := os.ReadFile(filepath.Join(dataDir, HeadFile))
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("read %s: %w", HeadFile, err)
	}
	seq, hashText, ok := parseHeadRecord(raw)
	if !ok {
		return nil // a torn, legacy or foreign record names nothing; it is rewritten at start
	}
	if head.Seq < seq {
		return fmt.Errorf("%w: %s names seq %d, the log ends at seq %d (bbolt fell back to an older commit, "+
			"or the log was replaced by an older copy); restore taskledger.db from a backup that holds seq %d",
			ErrLogBehindHead, HeadFile, seq, head.Seq, seq)
	}
	var at []byte
	err = store.RangeRaw(seq-1, func(s uint64, raw []byte) error {
		if s == seq {
			if e, err := ledger.DecodeEvent(raw); err == nil {
				at = e.Hash
			}
		}
		return errStop
	})
	if err != nil && !errors.Is(err, errStop) {
		return err
	}
	if seq > 0 && fmt.Sprintf("%064x", at) != hashText {
		return fmt.Errorf("%w: the event at seq %d is not the one %s recorded", ErrLogBehindHead, seq, HeadFile)
	}
	return nil
}

var errStop = errors.New("stop")

// openHeadFile replaces the record whole with head (a torn one from a cut
// is gone) and opens it for the in-place writes after each commit.
func openHeadFile(dataDir string, head ledger.Head) (*headFile, error) {
	path := filepath.Join(dataDir, HeadFile)
	if err := durable.WriteFile(path, headRecord(head), 0o600); err != nil {
		return nil, fmt.Errorf("write %s: %w", HeadFile, err)
	}
	f, err := os.OpenFile(path, os.O_RDWR, 0o600)
	if err != nil {
		return nil, fmt.Errorf("open %s: %w", HeadFile, err)
	}
	return &headFile{f: f}, nil
}

// write records a committed head (errors only lose the extra check).
func (hf *headFile) write(h ledger.Head) {
	if hf != nil {
		_, _ = hf.f.WriteAt(headRecord(h), 0)
	}
}

func (hf *headFile) close() {
	if hf != nil {
		_ = hf.f.Close()
	}
}
