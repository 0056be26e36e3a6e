package backup_test

import (
	"archive/tar"
	"bytes"
	"errors"
	"image"
	"image/jpeg"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"testing"

	"taskledger/audit/checkpoint"
	"taskledger/audit/merkle"
	"taskledger/backup"
	"taskledger/ledger"
	"taskledger/node/nodetest"
)

func jpegOf(seed byte) []byte {
	img := image.NewRGBA(image.Rect(0, 0, 8, 8))
	for i := range img.Pix {
		img.Pix[i] = uint8(i) ^ seed
	}
	var buf bytes.Buffer
	if err := jpeg.Encode(&buf, img, nil); err != nil {
		panic(err)
	}
	return buf.Bytes()
}

// nodeWithImage is a node holding one task with a reference image; it
// returns the blob's path.
func nodeWithImage(t *testing.T) (*nodetest.Node, string) {
	t.Helper()
	n := nodetest.Start(t)
	id := n.CreateTask(map[string]any{"a": 1})
	img := jpegOf(1)
	nodetest.Must(t, n.Do("PUT", "/api/v1/admin/tasks/"+id+"/reference-image", n.AdminToken, img,
		map[string]string{"Content-Type": "image/jpeg"}), http.StatusOK)
	blobs, err := os.ReadDir(filepath.Join(n.Dir, ledger.BlobDir))
	if err != nil || len(blobs) != 1 {
		t.Fatalf("blobs: %v %v", blobs, err)
	}
	return n, filepath.Join(n.Dir, ledger.BlobDir, blobs[0].Name())
}

// manifestOf reads a whole archive and returns its manifest's entry, or an
// error when the archive ends without one.
func manifestOf(r io.Reader) ([]byte, error) {
	tr := tar.NewReader(r)
	var last []byte
	for {
		h, err := tr.Next()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return nil, err
		}
		b, err := io.ReadAll(tr)
		if err != nil {
			return nil, err
		}
		last = nil
		if h.Name == backup.EntryManifest {
			last = b
		}
	}
	if last == nil {
		return nil, errors.New("no manifest")
	}
	return last, nil
}

func TestBackupRefusesAMissingBlobBeforeTheFirstByte(t *testing.T) {
	n, blob := nodeWithImage(t)
	saved, err := os.ReadFile(blob)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.Remove(blob); err != nil {
		t.Fatal(err)
	}
	r := n.Do("GET", "/api/v1/admin/backup", n.AdminToken, nil, nil)
	if r.Status != http.StatusInternalServerError || r.Header.Get("X-Backup-Head-Seq") != "" {
		t.Fatalf("backup with a missing blob: %d %v %s", r.Status, r.Header, r.Body)
	}
	if err := os.WriteFile(blob, saved, 0o600); err != nil { // the node's cleanup verifies its blobs
		t.Fatal(err)
	}
}

func TestBackupCutsTheStreamAtADamagedBlob(t *testing.T) {
	n, blob := nodeWithImage(t)
	saved, err := os.ReadFile(blob)
	if err != nil {
		t.Fatal(err)
	}
	damaged := append([]byte(nil), saved...)
	damaged[len(damaged)/2] ^= 1 // same size: found only while copying
	if err := os.WriteFile(blob, damaged, 0o600); err != nil {
		t.Fatal(err)
	}
	r := n.Do("GET", "/api/v1/admin/backup", n.AdminToken, nil, nil)
	if r.Status != http.StatusOK {
		t.Fatalf("backup: %d %s", r.Status, r.Body)
	}
	if _, err := manifestOf(bytes.NewReader(r.Body)); err == nil {
		t.Fatal("an archive with a damaged blob ends with a manifest")
	}
	if err := os.WriteFile(blob, saved, 0o600); err != nil {
		t.Fatal(err)
	}
}

func TestBackupRouteTakesNoQueryAndNeedsAnAdminToken(t *testing.T) {
	n := nodetest.Start(t)
	nodetest.MustError(t, n.Do("GET", "/api/v1/admin/backup?x=1", n.AdminToken, nil, nil), http.StatusBadRequest, "invalid_request")
	nodetest.MustUnauthorized(t, n.Do("GET", "/api/v1/admin/backup", "", nil, nil))
	d := n.RegisterDevice()
	nodetest.MustError(t, n.Do("GET", "/api/v1/admin/backup", d.Token, nil, nil), http.StatusForbidden, "wrong_credential_kind")
}

func TestAnArchiveRestoresAndNamesItsHead(t *testing.T) {
	n, _ := nodeWithImage(t)
	r := n.Do("GET", "/api/v1/admin/backup", n.AdminToken, nil, nil)
	if r.Status != http.StatusOK || r.Header.Get("Content-Type") != "application/x-tar" {
		t.Fatalf("backup: %d %v", r.Status, r.Header)
	}
	dir := filepath.Join(t.TempDir(), "restored")
	if err := backup.CheckTarget(dir); err != nil {
		t.Fatal(err)
	}
	tmp, err := backup.TempDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	key, err := checkpoint.LoadKey(n.Dir)
	if err != nil {
		t.Fatal(err)
	}
	m, err := backup.Extract(bytes.NewReader(r.Body), tmp, key.Verifier())
	if err != nil {
		t.Fatal(err)
	}
	if m.HeadSeq != n.Head() || len(m.Blobs) != 1 || r.Header.Get("X-Backup-Head-Seq") == "" {
		t.Fatalf("manifest head %d blobs %d, node head %d", m.HeadSeq, len(m.Blobs), n.Head())
	}
	store, err := ledger.Open(tmp, ledger.Options{ReadOnly: true})
	if err != nil {
		t.Fatal(err)
	}
	var scan *backup.Scan
	err = store.View(func(v *ledger.View) (err error) { scan, err = backup.ScanView(v, nil); return err })
	store.Close()
	if err != nil {
		t.Fatal(err)
	}
	if err := backup.CheckLog(m, scan); err != nil {
		t.Fatal(err)
	}
	lie := *m
	lie.Blobs = nil
	if err := backup.CheckLog(&lie, scan); !errors.Is(err, backup.ErrManifest) {
		t.Fatalf("a manifest without the log's blob: %v", err)
	}
	if err := backup.Install(tmp, dir); err != nil {
		t.Fatal(err)
	}
	if err := backup.CheckTarget(dir); !errors.Is(err, backup.ErrNotEmpty) {
		t.Fatalf("the installed directory is a target: %v", err)
	}
}

func TestNewestAndPruneReadOnlyScheduledArchives(t *testing.T) {
	dir := t.TempDir()
	for _, name := range []string{backup.FileName(3), backup.FileName(12), backup.FileName(7), "other.tar",
		backup.FilePrefix + "123.tar.partial", backup.FilePrefix + "12.tar"} {
		if err := os.WriteFile(filepath.Join(dir, name), nil, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	if seq, ok := backup.Newest(dir); !ok || seq != 12 {
		t.Fatalf("newest %d %v, want 12", seq, ok)
	}
	removed, err := backup.Prune(dir, 2)
	if err != nil || len(removed) != 2 {
		t.Fatalf("prune removed %v (%v), want the partial file and the oldest archive", removed, err)
	}
	for _, name := range []string{backup.FileName(12), backup.FileName(7), "other.tar", backup.FilePrefix + "12.tar"} {
		if _, err := os.Stat(filepath.Join(dir, name)); err != nil {
			t.Fatalf("%s: %v", name, err)
		}
	}
	if _, ok := backup.Newest(t.TempDir()); ok {
		t.Fatal("an empty directory has a newest archive")
	}
}

// countingLeaves is a merkle.LeafSource over leaf bytes held by the test,
// counting its reads.
type countingLeaves struct {
	raws  [][]byte
	reads int
}

func (s *countingLeaves) LeafHashes(from, to uint64, out [][merkle.HashSize]byte) error {
	s.reads++
	for i := from; i < to; i++ {
		copy(out[i-from][:], merkle.LeafHash(s.raws[i]))
	}
	return nil
}

// TestScanViewReadsNoTileInsideTheView: a tiled tree whose root at the
// view's head would need a tile read back (a second read transaction
// inside the view) is not asked for it: the scan hashes the view's events
// and gets the same root.
func TestScanViewReadsNoTileInsideTheView(t *testing.T) {
	n := nodetest.Start(t)
	n.CreateTask(map[string]any{"a": 1})
	src := &countingLeaves{}
	if err := n.Store.RangeRaw(0, func(_ uint64, raw []byte) error {
		src.raws = append(src.raws, append([]byte(nil), raw...))
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	head := uint64(len(src.raws))
	for i := len(src.raws); i < 300; i++ { // a complete first tile beyond the view's head
		src.raws = append(src.raws, []byte{byte(i), byte(i >> 8)})
	}
	tree := merkle.NewTiled(8, src)
	if err := tree.Append(1, src.raws); err != nil {
		t.Fatal(err)
	}
	var scan *backup.Scan
	err := n.Store.View(func(v *ledger.View) (err error) { scan, err = backup.ScanView(v, tree); return err })
	if err != nil {
		t.Fatal(err)
	}
	if src.reads != 0 {
		t.Fatalf("%d tile reads inside the view", src.reads)
	}
	want, err := tree.Root(head)
	if err != nil || !bytes.Equal(scan.Root, want) || scan.Head.Seq != head {
		t.Fatalf("scan of head %d: root %x, tree's %x (%v)", scan.Head.Seq, scan.Root, want, err)
	}
}
