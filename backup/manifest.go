package backup

import (
	"bytes"
	"encoding/hex"
	"fmt"
	"sort"

	"taskledger/audit/merkle"
	"taskledger/events"
	"taskledger/ledger"
)

// FormatVersion is the version of the archive layout described in doc.go.
const FormatVersion = 1

// Entry names of the archive.
const (
	EntryLog      = ledger.FileName
	EntryKey      = "checkpoint-key"
	EntryManifest = "manifest.json"
	blobPrefix    = ledger.BlobDir + "/"
)

// Manifest is the archive's last entry.
type Manifest struct {
	Format     int    `json:"format"`      // FormatVersion
	Created    string `json:"created"`     // RFC 3339 UTC, milliseconds (the server's clock)
	HeadSeq    uint64 `json:"head_seq"`    // the copy's last event
	HeadHash   string `json:"head_hash"`   // its hash, hex
	MerkleRoot string `json:"merkle_root"` // root of the tree over the copy's events, hex
	// Checkpoint is the signed checkpoint of size HeadSeq and root
	// MerkleRoot (the note text); Verifier is the public key that signed it.
	Checkpoint string `json:"checkpoint"`
	Verifier   string `json:"verifier"`
	Log        File   `json:"log"`   // taskledger.db
	Key        File   `json:"key"`   // checkpoint-key
	Blobs      []File `json:"blobs"` // every referenced blob, by name
	Snapshots  bool   `json:"snapshots"`
}

// File is one entry's size and SHA-256 (hex).
type File struct {
	Size   int64  `json:"size"`
	SHA256 string `json:"sha256"`
}

var (
	typeImage    = []byte(events.EvTaskReferenceImageSet)
	typeEvidence = []byte(events.EvTaskEvidenceAttached)
)

// Scan is what one pass over a log view finds: its head, the Merkle root
// over its events and every blob they reference.
type Scan struct {
	Head  ledger.Head
	Root  []byte
	Blobs []File // sorted by SHA256, one entry per blob
}

// ScanView reads every event of the view: the events must end at the
// view's head, and each reference image or evidence event names a blob.
// The Merkle root is tree's when it has reached the view's head (a
// serving node's tree, extended after each commit) and answers that size
// from memory, else it is computed from the events: a tiled tree's leaves
// are read back in a read transaction of their own, which must not be
// opened inside the view.
func ScanView(v *ledger.View, tree *merkle.Tree) (*Scan, error) {
	head, err := v.Head()
	if err != nil {
		return nil, err
	}
	var h *merkle.RootHasher
	var kept []byte
	if tree != nil && tree.Size() >= head.Seq {
		kept, _ = tree.RootInMemory(head.Seq)
	}
	if kept == nil {
		h = merkle.NewRootHasher()
	}
	blobs := map[string]int64{}
	var last ledger.Head
	var lastRaw []byte
	err = v.RangeRaw(0, func(seq uint64, raw []byte) error {
		if h != nil {
			if err := h.Add(raw); err != nil {
				return err
			}
		}
		last.Seq, lastRaw = seq, raw // raw stays valid while the view lasts
		// Only two event types name a blob: the others are not decoded
		// (a payload may quote a type's name; decoding then tells).
		if !bytes.Contains(raw, typeImage) && !bytes.Contains(raw, typeEvidence) {
			return nil
		}
		e, err := ledger.DecodeEvent(raw)
		if err != nil {
			return fmt.Errorf("seq %d: %w", seq, err)
		}
		if e.Type != events.EvTaskReferenceImageSet && e.Type != events.EvTaskEvidenceAttached {
			return nil
		}
		body, err := events.DecodeBody(e.Type, e.Schema, e.Body)
		if err != nil {
			return fmt.Errorf("seq %d: %w", seq, err)
		}
		sha, size := "", int64(0)
		switch b := body.(type) {
		case *events.TaskReferenceImageSet:
			sha, size = b.SHA256, b.Size
		case *events.TaskEvidenceAttached:
			sha, size = b.SHA256, b.Size
		}
		if old, ok := blobs[sha]; ok && old != size {
			return fmt.Errorf("seq %d: blob %s recorded with sizes %d and %d", seq, sha, old, size)
		}
		blobs[sha] = size
		return nil
	})
	if err == nil && lastRaw != nil {
		var e ledger.Event
		if e, err = ledger.DecodeEvent(lastRaw); err == nil {
			last.Hash = e.Hash
		}
	}
	if err != nil {
		return nil, err
	}
	if last.Seq != head.Seq || (head.Seq > 0 && hex.EncodeToString(last.Hash) != hex.EncodeToString(head.Hash)) {
		return nil, fmt.Errorf("%w: the head record names seq %d, the events end at seq %d", ledger.ErrCorrupt, head.Seq, last.Seq)
	}
	var root []byte
	if h != nil {
		root, err = h.Root()
	} else {
		root = kept
	}
	if err != nil {
		return nil, err
	}
	s := &Scan{Head: head, Root: root}
	for sha, size := range blobs {
		s.Blobs = append(s.Blobs, File{SHA256: sha, Size: size})
	}
	sort.Slice(s.Blobs, func(i, j int) bool { return s.Blobs[i].SHA256 < s.Blobs[j].SHA256 })
	return s, nil
}
