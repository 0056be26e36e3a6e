package ledger_test

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"taskledger/ledger"
)

func blobSHA(b []byte) string {
	s := sha256.Sum256(b)
	return hex.EncodeToString(s[:])
}

// blobFiles lists the names in the blob folder.
func blobFiles(t *testing.T, data string) []string {
	t.Helper()
	ents, err := os.ReadDir(filepath.Join(data, ledger.BlobDir))
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, e := range ents {
		out = append(out, e.Name())
	}
	return out
}

func TestBlobsPutGet(t *testing.T) {
	data := t.TempDir()
	b, err := ledger.OpenBlobs(data)
	if err != nil {
		t.Fatal(err)
	}
	st, err := os.Stat(filepath.Join(data, "blobs"))
	if err != nil || !st.IsDir() || st.Mode().Perm()&0o077 != 0 {
		t.Fatalf("blob folder: %v %v", st, err)
	}
	content := []byte("\x89PNG not really, but bytes are bytes")
	sha, err := b.Put(content)
	if err != nil || sha != blobSHA(content) {
		t.Fatalf("put: %s %v", sha, err)
	}
	// The file is named by the SHA-256, holds the exact bytes, is private,
	// and no temporary file is left behind.
	path := filepath.Join(data, "blobs", sha)
	raw, err := os.ReadFile(path)
	if err != nil || !bytes.Equal(raw, content) {
		t.Fatalf("file: %v", err)
	}
	if fi, _ := os.Stat(path); fi.Mode().Perm()&0o077 != 0 {
		t.Fatalf("blob mode %v", fi.Mode())
	}
	if files := blobFiles(t, data); len(files) != 1 || files[0] != sha {
		t.Fatalf("blob folder holds %v", files)
	}
	got, err := b.Get(sha)
	if err != nil || !bytes.Equal(got, content) {
		t.Fatalf("get: %v", err)
	}
	// Same content again: same name, still one file.
	again, err := b.Put(append([]byte{}, content...))
	if err != nil || again != sha || len(blobFiles(t, data)) != 1 {
		t.Fatalf("second put: %s %v %v", again, err, blobFiles(t, data))
	}
	// The empty blob is a blob too.
	esha, err := b.Put(nil)
	if err != nil || esha != blobSHA(nil) {
		t.Fatalf("empty put: %s %v", esha, err)
	}
	if e, err := b.Get(esha); err != nil || len(e) != 0 {
		t.Fatalf("empty get: %q %v", e, err)
	}
	// A reopened store sees the same blobs.
	b2, err := ledger.OpenBlobs(data)
	if err != nil {
		t.Fatal(err)
	}
	if got, err := b2.Get(sha); err != nil || !bytes.Equal(got, content) {
		t.Fatalf("get after reopen: %v", err)
	}
}

func TestBlobsGetRefusesNonNames(t *testing.T) {
	data := t.TempDir()
	b, err := ledger.OpenBlobs(data)
	if err != nil {
		t.Fatal(err)
	}
	sha, err := b.Put([]byte("x"))
	if err != nil {
		t.Fatal(err)
	}
	// A file outside the blob folder must never be reachable by name.
	if err := os.WriteFile(filepath.Join(data, "secret"), []byte("s"), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"", "../secret", "secret", strings.ToUpper(sha), sha[:63], sha + "0",
		sha[:62] + "/.", "../blobs/" + sha, blobSHA([]byte("never stored"))} {
		if got, err := b.Get(name); !errors.Is(err, ledger.ErrNotFound) || got != nil {
			t.Fatalf("get %q: %q %v", name, got, err)
		}
	}
}

func TestBlobsRepairsTruncatedFile(t *testing.T) {
	data := t.TempDir()
	b, err := ledger.OpenBlobs(data)
	if err != nil {
		t.Fatal(err)
	}
	content := bytes.Repeat([]byte("evidence"), 1000)
	sha := blobSHA(content)
	// A truncated file under the final name (not written by Put) and
	// garbage temporary files are harmless: Put writes the whole blob.
	if err := os.WriteFile(filepath.Join(data, "blobs", sha), content[:10], 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(data, "blobs", sha+".123.tmp"), []byte("junk"), 0o600); err != nil {
		t.Fatal(err)
	}
	if got, err := b.Put(content); err != nil || got != sha {
		t.Fatalf("put: %s %v", got, err)
	}
	if raw, err := b.Get(sha); err != nil || !bytes.Equal(raw, content) {
		t.Fatalf("blob not repaired: %d bytes, %v", len(raw), err)
	}
}

func TestBlobsConcurrentPut(t *testing.T) {
	data := t.TempDir()
	b, err := ledger.OpenBlobs(data)
	if err != nil {
		t.Fatal(err)
	}
	same := bytes.Repeat([]byte{7}, 64<<10)
	var wg sync.WaitGroup
	errs := make(chan error, 16)
	for i := range 16 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			c := same
			if i%2 == 1 {
				c = []byte{byte(i)}
			}
			sha, err := b.Put(c)
			if err == nil && sha != blobSHA(c) {
				err = errors.New("wrong name " + sha)
			}
			errs <- err
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Fatal(err)
		}
	}
	if files := blobFiles(t, data); len(files) != 9 { // the shared blob + 8 distinct ones
		t.Fatalf("blob folder holds %d files: %v", len(files), files)
	}
	if raw, err := b.Get(blobSHA(same)); err != nil || !bytes.Equal(raw, same) {
		t.Fatalf("shared blob: %v", err)
	}
}

func TestBlobsOpenFails(t *testing.T) {
	// A data path that is a file cannot hold a blob folder.
	f := filepath.Join(t.TempDir(), "file")
	if err := os.WriteFile(f, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := ledger.OpenBlobs(f); err == nil {
		t.Fatal("OpenBlobs under a file succeeded")
	}
	if err := ledger.SyncDir(filepath.Join(t.TempDir(), "missing")); err == nil {
		t.Fatal("SyncDir of a missing folder succeeded")
	}
}

type failingShared struct {
	ledger.BlobStore
	err error
}

func (f failingShared) Put([]byte) (string, error) { return "", f.err }

// TestSharedBlobsAreWrittenThroughAndReadBack: with a shared store, a
// committed blob is put there too, a blob missing from the folder is read
// from there, and a failed shared put fails the commit (no event may name
// a blob the other nodes cannot read).
func TestSharedBlobsAreWrittenThroughAndReadBack(t *testing.T) {
	shared, err := ledger.OpenBlobs(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	a, err := ledger.OpenBlobs(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	a.SetShared(shared)
	sha, err := a.Put([]byte("evidence"))
	if err != nil {
		t.Fatal(err)
	}
	if got, err := shared.Get(sha); err != nil || string(got) != "evidence" {
		t.Fatalf("shared copy: %q %v", got, err)
	}
	b, err := ledger.OpenBlobs(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	b.SetShared(shared)
	if got, err := b.Get(sha); err != nil || string(got) != "evidence" {
		t.Fatalf("read through the shared store: %q %v", got, err)
	}
	c, err := ledger.OpenBlobs(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	c.SetShared(failingShared{shared, errors.New("object store down")})
	if _, err := c.Put([]byte("other")); err == nil {
		t.Fatal("a blob the shared store refused was committed")
	}
}
