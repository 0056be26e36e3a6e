package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"taskledger/audit/checkpoint"
)

// TestCheckpointKeyCreateWritesOnceAndExportReadsIt: create writes a key
// (0600) and prints its verifier, which export prints too; a second create
// is refused (exit 1) and leaves the key as it was; an unknown action is a
// usage error (exit 2).
func TestCheckpointKeyCreateWritesOnceAndExportReadsIt(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "node")
	r := reviewCLI("checkpoint-key", "create", "--data", dir)
	if r.code != 0 || !strings.HasPrefix(r.stdout, "taskledger/") {
		t.Fatalf("create: %d %q %q", r.code, r.stdout, r.stderr)
	}
	path := filepath.Join(dir, checkpoint.KeyFile)
	st, err := os.Stat(path)
	if err != nil || st.Mode().Perm() != 0o600 {
		t.Fatalf("key file: %v %v, want mode 0600", st, err)
	}
	before, _ := os.ReadFile(path)
	if e := reviewCLI("checkpoint-key", "export", "--data", dir); e.code != 0 || e.stdout != r.stdout {
		t.Fatalf("export: %d %q, want %q", e.code, e.stdout, r.stdout)
	}
	again := reviewCLI("checkpoint-key", "create", "--data", dir)
	after, _ := os.ReadFile(path)
	if again.code != 1 || !strings.Contains(again.stderr, "already holds a checkpoint key") || string(after) != string(before) {
		t.Fatalf("second create: %d %q; key changed: %v", again.code, again.stderr, string(after) != string(before))
	}
	if u := reviewCLI("checkpoint-key", "rotate", "--data", dir); u.code != 2 {
		t.Fatalf("unknown action: %d, want 2", u.code)
	}
}
