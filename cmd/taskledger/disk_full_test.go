//go:build linux

package main_test

// A real full disk, from outside the server: the data directory is on a
// small tmpfs that the test fills. /readyz says disk_full before writes
// fail; once a commit cannot be written, the server acknowledges nothing
// more and exits non-zero; with space back, a restart finds every
// acknowledged command and verify passes.

import (
	"errors"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/google/uuid"

	"taskledger/node/nodetest/proc"
)

func freeBytes(t *testing.T, dir string) int64 {
	t.Helper()
	var st syscall.Statfs_t
	if err := syscall.Statfs(dir, &st); err != nil {
		t.Fatal(err)
	}
	return int64(st.Bavail) * st.Bsize
}

// fill writes zeros to path until it holds n bytes or the disk is full.
func fill(t *testing.T, path string, n int64) {
	t.Helper()
	f, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	buf := make([]byte, 1<<20)
	for written := int64(0); written < n; {
		m, err := f.Write(buf[:min(int64(len(buf)), n-written)])
		written += int64(m)
		if errors.Is(err, syscall.ENOSPC) {
			return
		}
		if err != nil {
			t.Fatal(err)
		}
	}
}

func TestFullDiskStopsTheServerAndLosesNothing(t *testing.T) {
	mnt := t.TempDir()
	if out, err := exec.Command("mount", "-t", "tmpfs", "-o", "size=100m", "tmpfs", mnt).CombinedOutput(); err != nil {
		t.Fatalf("mount a 100 MiB tmpfs for the data directory (needs root): %v %s", err, out)
	}
	t.Cleanup(func() { _ = exec.Command("umount", "-l", mnt).Run() }) // after the servers' cleanups
	dir := filepath.Join(mnt, "data")
	s := startServer(t, dir)
	c := proc.NewClient()
	payload := strings.Repeat("x", 8<<10)
	create := func(key string) (*proc.Resp, error) {
		return c.Do(s.URL, "POST", "/api/v1/admin/tasks", s.Admin, map[string]any{"payload": map[string]any{"k": key, "pad": payload}},
			map[string]string{"Idempotency-Key": key})
	}
	var acked []ackedCreate
	for range 5 {
		key := uuid.NewString()
		r, err := create(key)
		if err != nil || r.Status != http.StatusCreated {
			t.Fatalf("create on an empty disk: %v %v", r, err)
		}
		acked = append(acked, ackedCreate{key, r.JSON()["id"].(string)})
	}

	// Less than the readiness margin (64 MiB) left: /readyz takes the node
	// out of rotation before any write fails.
	fill(t, filepath.Join(mnt, "filler-1"), freeBytes(t, mnt)-40<<20)
	r, err := c.Do(s.URL, "GET", "/readyz", "", nil, nil)
	if err != nil || r.Status != http.StatusServiceUnavailable || r.JSON()["reason"] != "disk_full" {
		t.Fatalf("/readyz with %d bytes free: %v %v", freeBytes(t, mnt), r, err)
	}

	// The disk full: commits fail, the server fences and exits.
	fill(t, filepath.Join(mnt, "filler-2"), 1<<40)
	failed, _ := loadUntilFenced(t, s, create, 2000, false, &acked)
	if !failed {
		t.Fatalf("no 503 on a full disk; stderr:\n%s", s.Stderr())
	}
	if code := s.Proc.Wait(t); code == 0 {
		t.Fatalf("the server exited 0 on a full disk; stderr:\n%s", s.Stderr())
	}
	if !strings.Contains(s.Stderr(), "exiting: a write or sync of the log failed") {
		t.Fatalf("no exit line naming the failed write; stderr:\n%s", s.Stderr())
	}

	// Space back: everything acknowledged is there.
	for _, f := range []string{"filler-1", "filler-2"} {
		if err := os.Remove(filepath.Join(mnt, f)); err != nil {
			t.Fatal(err)
		}
	}
	again := startServer(t, dir)
	for _, a := range acked {
		r, err := c.Do(again.URL, "GET", "/api/v1/admin/tasks/"+a.id, again.Admin, nil, nil)
		if err != nil || r.Status != http.StatusOK {
			t.Fatalf("task %s answered 201 before the disk filled is not there after the restart: %v %v", a.id, r, err)
		}
	}
	if code := again.Stop(t); code != 0 {
		t.Fatalf("stop after the restart: exit %d", code)
	}
	if v := proc.CLI(t, "verify", "--data", dir); v.Code != 0 {
		t.Fatalf("verify after the restart: %d %s %s", v.Code, v.Stdout, v.Stderr)
	}
	t.Logf("%d commands acknowledged before the disk filled, all found after the restart", len(acked))
}
