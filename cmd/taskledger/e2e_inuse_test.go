package main_test

// One process opens the log at a time (operations.md → The data
// directory): a second serve, or an offline command while a server runs,
// exits non-zero saying the ledger is in use — and the running server is
// unharmed.

import (
	"crypto/sha256"
	"os"
	"path/filepath"
	"strings"
	"taskledger/node/nodetest/proc"
	"testing"
)

func TestE2ELedgerInUseRefusals(t *testing.T) {
	dir := t.TempDir()
	srv := startServer(t, dir)
	admin := srv.Admin
	c := proc.NewClient()
	if a, err := c.Do(srv.URL, "POST", "/api/v1/admin/tasks", admin,
		map[string]any{"payload": map[string]any{"n": 1}}, nil); err != nil || a.Status != 201 {
		t.Fatalf("create task: %v %v", err, a)
	}
	before := fileSum(t, filepath.Join(dir, "taskledger.db"))

	for _, args := range [][]string{
		{"serve", "--data", dir, "--listen", "127.0.0.1:0", "--clock=manual"},
		{"serve", "--data", dir, "--listen", "127.0.0.1:0"},
		{"admin-token", "create", "second", "--data", dir},
		{"admin-token", "revoke", "initial", "--data", dir},
		{"verify", "--data", dir},
	} {
		res := proc.CLI(t, args...)
		if res.Code == 0 {
			t.Errorf("%v exited 0 while a server runs", args)
		}
		if !strings.Contains(res.Stderr, "in use") {
			t.Errorf("%v: stderr does not say the ledger is in use: %q", args, res.Stderr)
		}
		if args[0] == "admin-token" && res.Stdout != "" {
			t.Errorf("%v printed %q on stdout", args, res.Stdout)
		}
	}
	if got := fileSum(t, filepath.Join(dir, "taskledger.db")); got != before {
		t.Errorf("the refused commands changed the ledger file")
	}

	// The running server still works and its token is still valid.
	a, err := c.Do(srv.URL, "POST", "/api/v1/admin/tasks", admin, map[string]any{"payload": map[string]any{"n": 2}}, nil)
	if err != nil || a.Status != 201 {
		t.Fatalf("create task after the refusals: %v %v", err, a)
	}
	if code := srv.Stop(t); code != 0 {
		t.Fatalf("serve exited %d", code)
	}
	// Once stopped, the same commands work.
	if res := proc.CLI(t, "admin-token", "create", "second", "--data", dir); res.Code != 0 || !adminTokenLine.MatchString(res.Stdout) {
		t.Fatalf("admin-token create after stop: exit %d %q %q", res.Code, res.Stdout, res.Stderr)
	}
	if res := proc.CLI(t, "verify", "--data", dir); res.Code != 0 {
		t.Fatalf("verify after stop: exit %d %q %q", res.Code, res.Stdout, res.Stderr)
	}
}

func fileSum(t *testing.T, path string) [32]byte {
	t.Helper()
	raw, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return sha256.Sum256(raw)
}
