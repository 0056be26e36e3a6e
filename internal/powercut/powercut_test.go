//go:build linux

package powercut_test

import (
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"taskledger/internal/powercut"
)

func TestCutKeepsOnlyWhatWasSynced(t *testing.T) {
	backing, mnt := t.TempDir(), t.TempDir()
	if err := os.WriteFile(filepath.Join(backing, "old"), []byte("before the mount"), 0o600); err != nil {
		t.Fatal(err)
	}
	f, err := powercut.Mount(backing, mnt)
	if err != nil {
		t.Fatal(err)
	}
	write := func(name, s string, sync bool) {
		t.Helper()
		fh, err := os.OpenFile(filepath.Join(mnt, name), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := fh.WriteString(s); err != nil {
			t.Fatal(err)
		}
		if sync {
			if err := fh.Sync(); err != nil {
				t.Fatal(err)
			}
		}
		if err := fh.Close(); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.MkdirAll(filepath.Join(mnt, "a", "b"), 0o700); err != nil {
		t.Fatal(err)
	}
	write("a/b/deep", "kept", true)
	write("synced", "one ", true)
	write("synced", "two", false) // lost at the cut
	write("never", "lost", false)
	write("old", " and after", false)
	write("renamed.tmp", "whole", true)
	if err := os.Rename(filepath.Join(mnt, "renamed.tmp"), filepath.Join(mnt, "renamed")); err != nil {
		t.Fatal(err)
	}
	if got, _ := os.ReadFile(filepath.Join(mnt, "synced")); string(got) != "one two" {
		t.Fatalf("before the cut the mount reads %q", got)
	}
	if f.Syncs() < 2 {
		t.Fatalf("%d syncs seen", f.Syncs())
	}
	lost, _, err := f.Cut(nil)
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]string{"synced": "one ", "never": "", "old": "before the mount", "renamed": "whole", "a/b/deep": "kept"}
	for name, w := range want {
		if got, err := os.ReadFile(filepath.Join(backing, name)); err != nil || string(got) != w {
			t.Errorf("after the cut %s holds %q (%v), want %q", name, got, err, w)
		}
	}
	if lost != 3 {
		t.Errorf("%d files lost writes, want 3", lost)
	}
}

func TestCutTearsAPrefixOfTheUnsyncedWrites(t *testing.T) {
	backing, mnt := t.TempDir(), t.TempDir()
	f, err := powercut.Mount(backing, mnt)
	if err != nil {
		t.Fatal(err)
	}
	p := filepath.Join(mnt, "head")
	if err := os.WriteFile(p, []byte("AAAAAAAA"), 0o600); err != nil {
		t.Fatal(err)
	}
	fh, err := os.OpenFile(p, os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	if err := fh.Sync(); err != nil {
		t.Fatal(err)
	}
	if _, err := fh.WriteAt([]byte("BBBBBBBBBBBB"), 0); err != nil { // in place, never synced
		t.Fatal(err)
	}
	fh.Close()
	seed := uint64(1)
	for ; ; seed++ { // a seed that tears (odds one in two)
		if r := rand.New(rand.NewPCG(seed, 0)); r.IntN(2) == 0 {
			break
		}
	}
	lost, torn, err := f.Cut(rand.New(rand.NewPCG(seed, 0)))
	if err != nil || lost != 1 || torn != 1 {
		t.Fatalf("cut: lost %d torn %d, %v", lost, torn, err)
	}
	got, _ := os.ReadFile(filepath.Join(backing, "head"))
	n := strings.Count(string(got), "B")
	if !strings.HasPrefix(string(got), strings.Repeat("B", n)) || string(got[n:]) != "AAAAAAAA"[min(n, 8):] {
		t.Fatalf("torn head %q is not a prefix of the new content over the old", got)
	}
}
