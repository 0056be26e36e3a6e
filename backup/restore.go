package backup

import (
	"archive/tar"
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"

	"taskledger/audit/checkpoint"
	"taskledger/ledger"
)

// manifestLimit bounds the manifest entry (a blob is about 100 bytes of it).
const manifestLimit = 256 << 20

// CheckTarget refuses a restore target that exists and is not empty, and
// one whose parent directory does not exist (the temporary directory is
// made there, so that the final rename stays on one file system).
func CheckTarget(dir string) error {
	entries, err := os.ReadDir(dir)
	switch {
	case errors.Is(err, os.ErrNotExist):
	case err != nil:
		return fmt.Errorf("backup: read %s: %w", dir, err)
	case len(entries) > 0:
		return fmt.Errorf("%w: %s holds %d entries (restore only into a new or empty directory)", ErrNotEmpty, dir, len(entries))
	}
	parent := filepath.Dir(filepath.Clean(dir))
	if st, err := os.Stat(parent); err != nil || !st.IsDir() {
		return fmt.Errorf("backup: the parent directory %s of the target does not exist", parent)
	}
	return nil
}

// TempDir makes the temporary directory beside dir that a restore unpacks
// into.
func TempDir(dir string) (string, error) {
	clean := filepath.Clean(dir)
	tmp, err := os.MkdirTemp(filepath.Dir(clean), "."+filepath.Base(clean)+".restore-*")
	if err != nil {
		return "", fmt.Errorf("backup: temporary directory: %w", err)
	}
	return tmp, nil
}

// Extract unpacks the archive read from r into dir (an empty directory)
// and checks everything that needs no log replay: the entries are exactly
// the log, the blobs, the key and the manifest (last), each of the size and
// SHA-256 the manifest names; the manifest's format; the key is the one
// whose public key the manifest names (and vkey, when given); the
// checkpoint verifies under it and covers the manifest's head and root.
// Each file is fsynced.
func Extract(r io.Reader, dir, vkey string) (*Manifest, error) {
	tr := tar.NewReader(r)
	got := map[string]File{}
	var order []string
	var m *Manifest
	for {
		hdr, err := tr.Next()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return nil, fmt.Errorf("%w: %v (truncated?)", ErrDamaged, err)
		}
		if m != nil {
			return nil, fmt.Errorf("%w: entry %q after the manifest", ErrDamaged, hdr.Name)
		}
		name := hdr.Name
		if hdr.Typeflag != tar.TypeReg || !validName(name) {
			return nil, fmt.Errorf("%w: unexpected entry %q", ErrDamaged, name)
		}
		if _, dup := got[name]; dup {
			return nil, fmt.Errorf("%w: entry %q twice", ErrDamaged, name)
		}
		if name == EntryManifest {
			if m, err = readManifest(tr, hdr.Size); err != nil {
				return nil, err
			}
			continue
		}
		f, err := writeFile(dir, name, tr, hdr.Size)
		if err != nil {
			return nil, err
		}
		got[name] = f
		order = append(order, name)
	}
	if m == nil {
		return nil, fmt.Errorf("%w: no manifest (the archive is truncated or not a taskledger backup)", ErrDamaged)
	}
	if err := checkFiles(m, got, order); err != nil {
		return nil, err
	}
	if err := checkKey(dir, m, vkey); err != nil {
		return nil, err
	}
	for _, d := range []string{filepath.Join(dir, ledger.BlobDir), dir} {
		if err := ledger.SyncDir(d); err != nil && !errors.Is(err, os.ErrNotExist) {
			return nil, err
		}
	}
	return m, nil
}

func validName(name string) bool {
	if name == EntryLog || name == EntryKey || name == EntryManifest {
		return true
	}
	sha, ok := strings.CutPrefix(name, blobPrefix)
	if !ok || len(sha) != 64 {
		return false
	}
	_, err := hex.DecodeString(sha)
	return err == nil && strings.ToLower(sha) == sha
}

func readManifest(r io.Reader, size int64) (*Manifest, error) {
	if size > manifestLimit {
		return nil, fmt.Errorf("%w: manifest of %d bytes", ErrDamaged, size)
	}
	raw, err := io.ReadAll(r)
	if err != nil {
		return nil, fmt.Errorf("%w: manifest: %v (truncated?)", ErrDamaged, err)
	}
	var m Manifest
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&m); err != nil {
		return nil, fmt.Errorf("%w: manifest is not valid JSON: %v", ErrDamaged, err)
	}
	if m.Format != FormatVersion {
		return nil, fmt.Errorf("%w: format %d (this taskledger reads format %d)", ErrFormat, m.Format, FormatVersion)
	}
	return &m, nil
}

// writeFile copies one entry into dir, hashing it, and fsyncs it.
func writeFile(dir, name string, r io.Reader, size int64) (File, error) {
	path := filepath.Join(dir, filepath.FromSlash(name))
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		return File{}, fmt.Errorf("backup: %w", err)
	}
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if err != nil {
		return File{}, fmt.Errorf("backup: %w", err)
	}
	defer f.Close()
	h := sha256.New()
	n, err := io.Copy(io.MultiWriter(f, h), r)
	if err != nil {
		return File{}, fmt.Errorf("%w: entry %s: %v (truncated?)", ErrDamaged, name, err)
	}
	if n != size {
		return File{}, fmt.Errorf("%w: entry %s holds %d bytes, its header %d", ErrDamaged, name, n, size)
	}
	if err := f.Sync(); err != nil {
		return File{}, fmt.Errorf("backup: %w", err)
	}
	if err := f.Close(); err != nil {
		return File{}, fmt.Errorf("backup: %w", err)
	}
	return File{Size: n, SHA256: hex.EncodeToString(h.Sum(nil))}, nil
}

// checkFiles compares the entries unpacked with the manifest: the same set
// (log, key, blobs in name order), each of the named size and hash.
func checkFiles(m *Manifest, got map[string]File, order []string) error {
	want := []string{EntryLog}
	files := map[string]File{EntryLog: m.Log, EntryKey: m.Key}
	for i, b := range m.Blobs {
		if i > 0 && m.Blobs[i-1].SHA256 >= b.SHA256 {
			return fmt.Errorf("%w: the blob list is not in name order", ErrManifest)
		}
		want = append(want, blobPrefix+b.SHA256)
		files[blobPrefix+b.SHA256] = b
	}
	want = append(want, EntryKey)
	for _, name := range want {
		g, ok := got[name]
		if !ok {
			return fmt.Errorf("%w: the manifest names %s, the archive has no such entry", ErrDamaged, name)
		}
		if w := files[name]; g != w {
			return fmt.Errorf("%w: %s holds %d bytes of SHA-256 %s, the manifest names %d bytes of %s",
				ErrDamaged, name, g.Size, g.SHA256, w.Size, w.SHA256)
		}
		if sha, ok := strings.CutPrefix(name, blobPrefix); ok && g.SHA256 != sha {
			return fmt.Errorf("%w: blob %s does not hash to its name", ErrDamaged, sha)
		}
	}
	if len(order) != len(want) {
		return fmt.Errorf("%w: the archive has %d entries besides the manifest, the manifest names %d", ErrDamaged, len(order), len(want))
	}
	for i := range want {
		if order[i] != want[i] {
			return fmt.Errorf("%w: entry %s is out of order", ErrDamaged, order[i])
		}
	}
	return nil
}

// checkKey checks the restored key against the manifest's verifier (and
// vkey), and the manifest's checkpoint against that key, head and root.
func checkKey(dir string, m *Manifest, vkey string) error {
	key, err := checkpoint.LoadKey(dir)
	if err != nil {
		return fmt.Errorf("%w: checkpoint-key: %v", ErrDamaged, err)
	}
	if key.Verifier() != m.Verifier {
		return fmt.Errorf("%w: checkpoint-key is not the key of the manifest's verifier", ErrManifest)
	}
	if vkey != "" && strings.TrimSpace(vkey) != m.Verifier {
		return fmt.Errorf("%w: the backup is signed by %s, not by the --key given", ErrManifest, m.Verifier)
	}
	cp, err := checkpoint.Open([]byte(m.Checkpoint), m.Verifier)
	if err != nil {
		return fmt.Errorf("%w: checkpoint: %v", ErrManifest, err)
	}
	if cp.Size != m.HeadSeq {
		return fmt.Errorf("%w: the checkpoint is of size %d, the manifest's head seq %d", ErrManifest, cp.Size, m.HeadSeq)
	}
	if hex.EncodeToString(cp.Root) != m.MerkleRoot {
		return fmt.Errorf("%w: the checkpoint's root is not the manifest's Merkle root", ErrManifest)
	}
	return nil
}

// CheckLog compares the restored log, scanned, with the manifest: the
// same head, the Merkle root the checkpoint signed, the same blob set.
func CheckLog(m *Manifest, s *Scan) error {
	if s.Head.Seq != m.HeadSeq {
		return fmt.Errorf("%w: the log ends at seq %d, the manifest names head seq %d", ErrManifest, s.Head.Seq, m.HeadSeq)
	}
	if s.Head.Seq > 0 && hex.EncodeToString(s.Head.Hash) != m.HeadHash {
		return fmt.Errorf("%w: the log's head hash is not the manifest's", ErrManifest)
	}
	if hex.EncodeToString(s.Root) != m.MerkleRoot {
		return fmt.Errorf("%w: the log's Merkle root %x is not the signed checkpoint's %s", ErrManifest, s.Root, m.MerkleRoot)
	}
	if len(s.Blobs) != len(m.Blobs) {
		return fmt.Errorf("%w: the log references %d blobs, the manifest names %d", ErrManifest, len(s.Blobs), len(m.Blobs))
	}
	for i := range s.Blobs {
		if s.Blobs[i] != m.Blobs[i] {
			return fmt.Errorf("%w: the log references blob %s of %d bytes, the manifest names %s of %d bytes",
				ErrManifest, s.Blobs[i].SHA256, s.Blobs[i].Size, m.Blobs[i].SHA256, m.Blobs[i].Size)
		}
	}
	return nil
}

// Install renames the checked temporary directory into place and fsyncs
// the parent: dir appears whole or not at all. An empty dir is replaced.
func Install(tmp, dir string) error {
	if err := CheckTarget(dir); err != nil {
		return err
	}
	if err := ledger.SyncDir(tmp); err != nil {
		return err
	}
	if err := os.Remove(dir); err != nil && !errors.Is(err, os.ErrNotExist) {
		return fmt.Errorf("backup: remove the empty %s: %w", dir, err)
	}
	if err := os.Rename(tmp, dir); err != nil {
		return fmt.Errorf("backup: install: %w", err)
	}
	return ledger.SyncDir(filepath.Dir(filepath.Clean(dir)))
}
