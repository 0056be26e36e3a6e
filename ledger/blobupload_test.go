package ledger_test

import (
	"os"
	"path/filepath"
	"testing"

	"taskledger/ledger"
)

func mustUpload(t *testing.T, b *ledger.Blobs, data []byte) *ledger.BlobRef {
	t.Helper()
	u, err := b.Create()
	if err != nil {
		t.Fatal(err)
	}
	if _, err := u.Write(data); err != nil {
		t.Fatal(err)
	}
	ref, err := u.Commit()
	if err != nil {
		t.Fatal(err)
	}
	if ref.SHA256() != blobSHA(data) || ref.Size() != int64(len(data)) {
		t.Fatalf("ref %s/%d", ref.SHA256(), ref.Size())
	}
	return ref
}

func dirNames(t *testing.T, dir string) []string {
	t.Helper()
	entries, err := os.ReadDir(filepath.Join(dir, ledger.BlobDir))
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, e := range entries {
		out = append(out, e.Name())
	}
	return out
}

// A refused writer's blob goes only when it did not exist before and no
// other writer of the same bytes kept it.
func TestBlobRefReleaseRemovesOnlyUnreferencedFreshBlobs(t *testing.T) {
	dir := t.TempDir()
	b, err := ledger.OpenBlobs(dir)
	if err != nil {
		t.Fatal(err)
	}
	data := []byte("evidence bytes")

	// Alone and refused: removed.
	if removed, err := mustUpload(t, b, data).Release(false); !removed || err != nil {
		t.Fatalf("refused alone: removed %v, %v", removed, err)
	}
	if names := dirNames(t, dir); len(names) != 0 {
		t.Fatalf("left %v", names)
	}
	// Two writers of the same bytes, one kept: the blob stays whatever the
	// order of their releases.
	for _, keptFirst := range []bool{true, false} {
		r1, r2 := mustUpload(t, b, data), mustUpload(t, b, data)
		if keptFirst {
			r1.Release(true)
			r2.Release(false)
		} else {
			r1.Release(false)
			r2.Release(true)
		}
		if names := dirNames(t, dir); len(names) != 1 || names[0] != blobSHA(data) {
			t.Fatalf("kept first %v: %v", keptFirst, names)
		}
		// Now it exists before the next writer: a refusal leaves it.
		if removed, _ := mustUpload(t, b, data).Release(false); removed {
			t.Fatal("a blob that existed before was removed")
		}
		if names := dirNames(t, dir); len(names) != 1 {
			t.Fatalf("after a refused writer of an existing blob: %v", names)
		}
		os.Remove(filepath.Join(dir, ledger.BlobDir, blobSHA(data)))
	}
	// Both refused: removed once the last lets go; Release twice is a no-op.
	r1, r2 := mustUpload(t, b, data), mustUpload(t, b, data)
	if removed, _ := r1.Release(false); removed {
		t.Fatal("removed while another writer holds it")
	}
	if removed, _ := r1.Release(false); removed {
		t.Fatal("second release acted")
	}
	if removed, _ := r2.Release(false); !removed {
		t.Fatal("not removed after both were refused")
	}
	// Put always keeps.
	if _, err := b.Put(data); err != nil {
		t.Fatal(err)
	}
	if names := dirNames(t, dir); len(names) != 1 {
		t.Fatalf("after Put: %v", names)
	}
}

// Abort removes the temporary file; Commit after Abort is refused; Collect
// removes temporary files and unreferenced blobs, skips pinned ones and
// leaves other files alone.
func TestBlobUploadAbortAndCollect(t *testing.T) {
	dir := t.TempDir()
	b, err := ledger.OpenBlobs(dir)
	if err != nil {
		t.Fatal(err)
	}
	u, err := b.Create()
	if err != nil {
		t.Fatal(err)
	}
	u.Write([]byte("partial"))
	if names := dirNames(t, dir); len(names) != 1 {
		t.Fatalf("no temporary file: %v", names)
	}
	u.Abort()
	u.Abort()
	if names := dirNames(t, dir); len(names) != 0 {
		t.Fatalf("abort left %v", names)
	}
	if _, err := u.Commit(); err == nil {
		t.Fatal("commit after abort")
	}

	kept, orphan, pinned := []byte("kept"), []byte("orphan"), []byte("pinned")
	for _, d := range [][]byte{kept, orphan} {
		if _, err := b.Put(d); err != nil {
			t.Fatal(err)
		}
	}
	held := mustUpload(t, b, pinned)
	crashed, _ := b.Create() // never finished
	crashed.Write([]byte("half"))
	os.WriteFile(filepath.Join(dir, ledger.BlobDir, "NOTES"), []byte("x"), 0o600)
	c, err := b.Collect(func(sha string) (bool, error) { return sha == blobSHA(kept), nil })
	if err != nil || c.Temporary != 1 || c.Unreferenced != 1 || c.Bytes != int64(len("half")+len(orphan)) {
		t.Fatalf("collect: %+v %v", c, err)
	}
	names := dirNames(t, dir)
	want := map[string]bool{blobSHA(kept): true, blobSHA(pinned): true, "NOTES": true}
	if len(names) != len(want) {
		t.Fatalf("after collect: %v", names)
	}
	for _, n := range names {
		if !want[n] {
			t.Fatalf("after collect: %v", names)
		}
	}
	held.Release(true)
	// A failing reference check stops the collection with its error.
	if _, err := b.Collect(func(string) (bool, error) { return false, os.ErrPermission }); err == nil {
		t.Fatal("collect ignored the reference check's error")
	}
}
