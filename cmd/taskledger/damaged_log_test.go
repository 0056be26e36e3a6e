package main_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// damagedDir returns a data directory with a few events and a snapshot
// covering them, the server stopped.
func damagedDir(t *testing.T) string {
	t.Helper()
	dir := t.TempDir()
	s := startServer(t, dir)
	tok := adminToken(t, dir)
	c := newClient()
	for i := range 20 {
		a, err := c.do(s.URL, "POST", "/api/v1/admin/tasks", tok, map[string]any{"payload": map[string]any{"n": i}}, nil)
		if err != nil || a.Status != 201 {
			t.Fatalf("create task: %v %v", a, err)
		}
	}
	if code := s.stop(); code != 0 {
		t.Fatalf("stop: %d", code)
	}
	if r := runCLI(t, "snapshot", "create", "--data", dir); r.Code != 0 {
		t.Fatalf("snapshot create: %d %s", r.Code, r.Stderr)
	}
	return dir
}

func refusedClearly(t *testing.T, what string, r cliResult, want ...string) {
	t.Helper()
	if r.Code == 0 {
		t.Fatalf("%s: exit 0, want a refusal\n%s", what, r.Stderr)
	}
	for _, bad := range []string{"panic", "SIGSEGV", "goroutine "} {
		if strings.Contains(r.Stderr, bad) {
			t.Fatalf("%s crashed instead of refusing:\n%s", what, r.Stderr)
		}
	}
	for _, w := range want {
		if !strings.Contains(r.Stderr, w) {
			t.Fatalf("%s: stderr lacks %q:\n%s", what, w, r.Stderr)
		}
	}
}

// A log file cut short (its end lost) is refused by serve and reported by
// verify, before bbolt reads past the end of the file.
func TestTruncatedLogIsRefused(t *testing.T) {
	dir := damagedDir(t)
	db := filepath.Join(dir, "taskledger.db")
	if err := os.Truncate(db, 3*4096); err != nil {
		t.Fatal(err)
	}
	refusedClearly(t, "serve", runCLI(t, "serve", "--data", dir, "--listen", "127.0.0.1:0", "--clock=manual"), "truncated")
	refusedClearly(t, "verify", runCLI(t, "verify", "--data", dir), "truncated")
	if fi, _ := os.Stat(db); fi.Size() != 3*4096 {
		t.Fatalf("the refusal changed the file: %d bytes", fi.Size())
	}
}

// A missing or empty log beside snapshots that cover events is refused:
// the message names the snapshot's seq and says to restore the log.
func TestMissingLogBesideSnapshotsIsRefused(t *testing.T) {
	dir := damagedDir(t)
	db := filepath.Join(dir, "taskledger.db")
	if err := os.WriteFile(db, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	serve := func() cliResult {
		return runCLI(t, "serve", "--data", dir, "--listen", "127.0.0.1:0", "--clock=manual")
	}
	refusedClearly(t, "serve on an empty log", serve(), "empty", "up to seq ", "snapshot-", "restore")
	if fi, _ := os.Stat(db); fi.Size() != 0 {
		t.Fatalf("serve wrote a new ledger over the empty file (%d bytes)", fi.Size())
	}
	refusedClearly(t, "verify on an empty log", runCLI(t, "verify", "--data", dir), "empty")
	os.Remove(db)
	refusedClearly(t, "serve on a missing log", serve(), "missing", "restore")
	if _, err := os.Stat(db); err == nil {
		t.Fatalf("serve created a new ledger beside the snapshots")
	}
}
