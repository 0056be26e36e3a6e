package durable

import (
	"os"
	"path/filepath"
	"testing"
)

func TestWriteFileReplacesTheContentWhole(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "side")
	for _, want := range []string{"first\n", "second, longer\n", "3\n"} {
		if err := WriteFile(path, []byte(want), 0o600); err != nil {
			t.Fatal(err)
		}
		got, err := os.ReadFile(path)
		if err != nil || string(got) != want {
			t.Fatalf("read back %q, %v; want %q", got, err, want)
		}
	}
	fi, err := os.Stat(path)
	if err != nil || fi.Mode().Perm() != 0o600 {
		t.Fatalf("mode %v, %v; want 0600", fi.Mode().Perm(), err)
	}
	if _, err := os.Stat(path + TmpSuffix); !os.IsNotExist(err) {
		t.Fatalf("the temporary file is left: %v", err)
	}
}

func TestWriteFileReportsAMissingDirectory(t *testing.T) {
	if err := WriteFile(filepath.Join(t.TempDir(), "no", "side"), []byte("x"), 0o600); err == nil {
		t.Fatal("a write into a missing directory succeeded")
	}
}
