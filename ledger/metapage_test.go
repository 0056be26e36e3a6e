package ledger

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// Check names a zeroed meta page (either one) instead of running bbolt's
// check into its assertion; the file still opens on the other page.
func TestCheckNamesAZeroedMetaPage(t *testing.T) {
	for _, page := range []int{0, 1} {
		dir := t.TempDir()
		s, err := Open(dir, Options{})
		if err != nil {
			t.Fatal(err)
		}
		ps := s.db.Info().PageSize
		for _, name := range []string{"a", "b"} { // two commits: both meta pages hold the buckets
			if err := s.PutAdminToken(name, make([]byte, 32)); err != nil {
				t.Fatal(err)
			}
		}
		if err := s.Check(); err != nil {
			t.Fatalf("check of a new log: %v", err)
		}
		s.Close()
		f, err := os.OpenFile(filepath.Join(dir, FileName), os.O_WRONLY, 0)
		if err != nil {
			t.Fatal(err)
		}
		_, err = f.WriteAt(make([]byte, ps), int64(page*ps))
		f.Close()
		if err != nil {
			t.Fatal(err)
		}
		s, err = Open(dir, Options{ReadOnly: true})
		if err != nil {
			t.Fatalf("open with meta page %d zeroed: %v", page, err)
		}
		err = s.Check()
		s.Close()
		want := "meta page " + string(rune('0'+page)) + " "
		if !errors.Is(err, ErrDamaged) || !strings.Contains(err.Error(), want) || strings.Contains(err.Error(), "assertion") {
			t.Fatalf("meta page %d zeroed: Check = %v, want ErrDamaged naming %q", page, err, want)
		}
	}
}
