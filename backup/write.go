package backup

import (
	"archive/tar"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"hash"
	"io"
	"os"
	"path/filepath"
	"time"

	"taskledger/audit/checkpoint"
	"taskledger/audit/merkle"
	"taskledger/ledger"
)

// Source is what a backup copies besides the log view: the data directory
// (its blobs and checkpoint key), the signing key and the clock's now.
type Source struct {
	DataDir string
	Key     *checkpoint.Key
	Now     time.Time
	// Tree, when set, is the serving node's Merkle tree: its root of the
	// copy's head is used instead of hashing every event again.
	Tree *merkle.Tree
}

// Plan is a backup decided inside one view: what it will copy.
type Plan struct {
	view *ledger.View
	src  Source
	scan *Scan
	key  []byte
}

// NewPlan scans the view (head, Merkle root, referenced blobs) and reads
// the key file.
func NewPlan(v *ledger.View, src Source) (*Plan, error) {
	scan, err := ScanView(v, src.Tree)
	if err != nil {
		return nil, fmt.Errorf("backup: read the log: %w", err)
	}
	key, err := os.ReadFile(filepath.Join(src.DataDir, checkpoint.KeyFile))
	if err != nil {
		return nil, fmt.Errorf("backup: read the checkpoint key: %w", err)
	}
	for _, b := range scan.Blobs { // refused before the first byte; content is checked as it is copied
		st, err := os.Stat(filepath.Join(src.DataDir, ledger.BlobDir, b.SHA256))
		if errors.Is(err, os.ErrNotExist) {
			return nil, fmt.Errorf("%w: %s is missing", ErrBlob, b.SHA256)
		}
		if err != nil {
			return nil, fmt.Errorf("%w: %v", ErrBlob, err)
		}
		if st.Size() != b.Size {
			return nil, fmt.Errorf("%w: %s holds %d bytes, the log records %d", ErrBlob, b.SHA256, st.Size(), b.Size)
		}
	}
	return &Plan{view: v, src: src, scan: scan, key: key}, nil
}

// Head is the head the backup copies.
func (p *Plan) Head() ledger.Head { return p.scan.Head }

// Size is the archive's size without the manifest's own entry (which
// depends on the hashes computed while writing): a progress bar's total.
func (p *Plan) Size() int64 {
	n := tarSize(p.view.Size()) + tarSize(int64(len(p.key))) + 1024
	for _, b := range p.scan.Blobs {
		n += tarSize(b.Size)
	}
	return n
}

func tarSize(n int64) int64 { return 512 + (n+511)/512*512 }

// Write streams the archive to w: the log file, the blobs, the key and the
// manifest, never more than one copy buffer in memory. It returns the
// manifest written.
func (p *Plan) Write(w io.Writer) (*Manifest, error) {
	tw := tar.NewWriter(w)
	mtime := p.src.Now.UTC().Truncate(time.Second)
	m := &Manifest{Format: FormatVersion, Created: p.src.Now.UTC().Format("2006-01-02T15:04:05.000Z"),
		HeadSeq: p.scan.Head.Seq, HeadHash: hex.EncodeToString(p.scan.Head.Hash),
		MerkleRoot: hex.EncodeToString(p.scan.Root), Verifier: p.src.Key.Verifier(), Blobs: []File{}}
	if p.scan.Head.Seq == 0 {
		m.HeadHash = ""
	}
	note, err := p.src.Key.Sign(checkpoint.Checkpoint{Size: p.scan.Head.Seq, Root: p.scan.Root, Time: p.src.Now.UnixMilli()})
	if err != nil {
		return nil, fmt.Errorf("backup: sign the checkpoint: %w", err)
	}
	m.Checkpoint = string(note)

	size := p.view.Size()
	h := sha256.New()
	if err := header(tw, EntryLog, size, mtime); err != nil {
		return nil, err
	}
	if n, err := p.view.WriteTo(io.MultiWriter(tw, h)); err != nil {
		return nil, err
	} else if n != size {
		return nil, fmt.Errorf("backup: the log copy has %d bytes, the transaction %d", n, size)
	}
	m.Log = File{Size: size, SHA256: hex.EncodeToString(h.Sum(nil))}

	for _, b := range p.scan.Blobs {
		if err := copyBlob(tw, p.src.DataDir, b, mtime, h); err != nil {
			return nil, err
		}
		m.Blobs = append(m.Blobs, b)
	}

	if err := header(tw, EntryKey, int64(len(p.key)), mtime); err != nil {
		return nil, err
	}
	if _, err := tw.Write(p.key); err != nil {
		return nil, fmt.Errorf("backup: write: %w", err)
	}
	sum := sha256.Sum256(p.key)
	m.Key = File{Size: int64(len(p.key)), SHA256: hex.EncodeToString(sum[:])}

	doc, err := json.MarshalIndent(m, "", "  ")
	if err != nil {
		return nil, err
	}
	doc = append(doc, '\n')
	if err := header(tw, EntryManifest, int64(len(doc)), mtime); err != nil {
		return nil, err
	}
	if _, err := tw.Write(doc); err != nil {
		return nil, fmt.Errorf("backup: write: %w", err)
	}
	if err := tw.Close(); err != nil {
		return nil, fmt.Errorf("backup: write: %w", err)
	}
	return m, nil
}

func header(tw *tar.Writer, name string, size int64, mtime time.Time) error {
	err := tw.WriteHeader(&tar.Header{Typeflag: tar.TypeReg, Name: name, Size: size, Mode: 0o600,
		ModTime: mtime, Format: tar.FormatUSTAR})
	if err != nil {
		return fmt.Errorf("backup: write: %w", err)
	}
	return nil
}

// copyBlob streams one blob into the archive, checking its size and hash
// as it goes: a damaged blob fails the backup rather than being copied.
func copyBlob(tw *tar.Writer, dataDir string, b File, mtime time.Time, h hash.Hash) error {
	f, err := os.Open(filepath.Join(dataDir, ledger.BlobDir, b.SHA256))
	if errors.Is(err, os.ErrNotExist) {
		return fmt.Errorf("%w: %s is missing", ErrBlob, b.SHA256)
	}
	if err != nil {
		return fmt.Errorf("%w: %v", ErrBlob, err)
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return fmt.Errorf("%w: %v", ErrBlob, err)
	}
	if st.Size() != b.Size {
		return fmt.Errorf("%w: %s holds %d bytes, the log records %d", ErrBlob, b.SHA256, st.Size(), b.Size)
	}
	if err := header(tw, blobPrefix+b.SHA256, b.Size, mtime); err != nil {
		return err
	}
	h.Reset()
	n, err := io.Copy(io.MultiWriter(tw, h), io.LimitReader(f, b.Size))
	if err != nil {
		return fmt.Errorf("backup: copy blob %s: %w", b.SHA256, err)
	}
	if n != b.Size || hex.EncodeToString(h.Sum(nil)) != b.SHA256 {
		return fmt.Errorf("%w: %s does not hash to its name", ErrBlob, b.SHA256)
	}
	return nil
}
