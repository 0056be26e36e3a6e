package client

import (
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// The client reads time only through Clock; only localstate imports bbolt;
// no source file is 1000 lines or more.
func TestSourceRules(t *testing.T) {
	err := filepath.WalkDir(".", func(path string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() || !strings.HasSuffix(path, ".go") {
			return err
		}
		data, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		src := string(data)
		test := strings.HasSuffix(path, "_test.go")
		if !test && path != "clock.go" && !strings.HasPrefix(path, filepath.Join("internal", "e2e")) &&
			strings.Contains(src, "time.Now()") {
			t.Errorf("%s: time.Now() outside the clock", path)
		}
		if !test && strings.Contains(src, "\"go.etcd.io/"+"bbolt") && !strings.HasPrefix(path, "localstate"+string(filepath.Separator)) {
			t.Errorf("%s imports bbolt; only client/localstate may", path)
		}
		if n := strings.Count(src, "\n"); n >= 1000 {
			t.Errorf("%s has %d lines", path, n)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}
