//go:build failpoints

package durable

import (
	"errors"
	"os"
	"path/filepath"
	"syscall"
	"testing"

	"taskledger/internal/failpoint"
)

// A cut after each step leaves the old content under the name (the new
// one once renamed): the .tmp file takes what was not yet fsynced.
func TestWriteFileCutAtEachStepLeavesOldOrNewWhole(t *testing.T) {
	for _, point := range []string{failpoint.SideFileWritten, failpoint.SideFileSynced, failpoint.SideFileRenamed} {
		t.Run(point, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "side")
			if err := WriteFile(path, []byte("old record\n"), 0o600); err != nil {
				t.Fatal(err)
			}
			disable, err := failpoint.Enable(point, "eio")
			if err != nil {
				t.Fatal(err)
			}
			err = WriteFile(path, []byte("new record\n"), 0o600)
			disable()
			if !errors.Is(err, syscall.EIO) {
				t.Fatalf("cut at %s: %v, want EIO", point, err)
			}
			got, _ := os.ReadFile(path)
			want := "old record\n"
			if point == failpoint.SideFileRenamed {
				want = "new record\n"
			}
			if string(got) != want {
				t.Fatalf("after a cut at %s the file holds %q, want %q", point, got, want)
			}
			if err := WriteFile(path, []byte("next\n"), 0o600); err != nil {
				t.Fatalf("a write after the cut: %v", err)
			}
		})
	}
}
