//go:build linux

package main_test

import (
	"bytes"
	"fmt"
	"net/http"
	"os/exec"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/google/uuid"

	"taskledger/node/nodetest/proc"
)

// A sync of the log that fails on the running server — injected from
// outside with strace's fault injection on fdatasync (EIO), every call or
// every second one (bbolt syncs the data pages, then the meta page) —
// answers 503 and then nothing more is acknowledged: no 2xx for a request
// sent after the first 503, not for the retry of a command that got 503;
// the server exits non-zero by itself. Restarted without the fault, it
// holds every command answered 2xx, and verify passes.
func TestFailedSyncStopsTheServerAndLosesNothing(t *testing.T) {
	strace, err := exec.LookPath("strace")
	if err != nil {
		t.Fatal("strace is needed to inject the failed fdatasync from outside the server (apt-get install strace)")
	}
	for _, when := range []string{"1+", "2+2"} {
		t.Run("when="+when, func(t *testing.T) {
			failedSyncRun(t, strace, when)
		})
	}
}

// ackedCreate is a task create answered 2xx: its key and the task's id.
type ackedCreate struct{ key, id string }

func failedSyncRun(t *testing.T, strace, when string) {
	s := startServer(t, "")
	c := proc.NewClient()
	create := func(key string) (*proc.Resp, error) {
		return c.Do(s.URL, "POST", "/api/v1/admin/tasks", s.Admin, map[string]any{"payload": map[string]any{"k": key}},
			map[string]string{"Idempotency-Key": key})
	}
	var acked []ackedCreate
	for range 5 { // acknowledged before the fault
		key := uuid.NewString()
		r, err := create(key)
		if err != nil || r.Status != http.StatusCreated {
			t.Fatalf("create before the fault: %v %v", r, err)
		}
		acked = append(acked, ackedCreate{key, r.JSON()["id"].(string)})
	}

	tr := proc.Start(t, nil, strace, "-f", "-qq", "-o", "/dev/null", "-p", fmt.Sprint(s.Proc.Pid()),
		"-e", "trace=fdatasync,fsync", "-e", "inject=fdatasync:error=EIO:when="+when)
	waitTraced(t, s.Proc.Pid())

	failed, after2xx := loadUntilFenced(t, s, create, 400, true, &acked)
	if !failed {
		t.Fatalf("no 503 while fdatasync failed (when=%s); stderr:\n%s", when, s.Stderr())
	}
	code := s.Proc.Wait(t)
	tr.Wait(t)
	if code == 0 {
		t.Fatalf("the server exited 0 after a failed sync; stderr:\n%s", s.Stderr())
	}
	if !strings.Contains(s.Stderr(), "exiting: a write or sync of the log failed") {
		t.Fatalf("no exit line naming the failed sync; stderr:\n%s", s.Stderr())
	}

	again := startServer(t, s.Data)
	for _, a := range acked {
		r, err := c.Do(again.URL, "GET", "/api/v1/admin/tasks/"+a.id, again.Admin, nil, nil)
		if err != nil || r.Status != http.StatusOK {
			t.Fatalf("task %s answered 201 before the failure is not there after the restart: %v %v", a.id, r, err)
		}
		r, err = create(a.key)
		if err == nil {
			// the retry of an acknowledged create replays its answer
			if r.Status != http.StatusCreated || r.JSON()["id"] != a.id {
				t.Fatalf("retry of acknowledged key %s: %s", a.key, r)
			}
		}
	}
	if code := again.Stop(t); code != 0 {
		t.Fatalf("stop after the restart: exit %d", code)
	}
	v := proc.CLI(t, "verify", "--data", s.Data)
	if v.Code != 0 || !strings.HasPrefix(v.Stdout, "ok") {
		t.Fatalf("verify after the restart: %d %s %s", v.Code, v.Stdout, v.Stderr)
	}
	t.Logf("when=%s: %d commands acknowledged and found after the restart, %d acknowledged after a 503",
		when, len(acked), after2xx)
}

// loadUntilFenced sends creates from 4 workers until the server is gone
// (at most perWorker each) and records every one answered 2xx in acked. A
// 2xx to a request sent after some request got 503 is an error: a fenced
// server acknowledges nothing. With retry, every third request repeats a
// key that got 503. It reports whether any request got 503, and how many
// were acknowledged after one.
func loadUntilFenced(t *testing.T, s *proc.Server, create func(key string) (*proc.Resp, error), perWorker int,
	retry bool, acked *[]ackedCreate) (bool, int32) {
	var mu sync.Mutex
	var failed atomic.Bool
	var after2xx atomic.Int32
	var refusedKeys sync.Map
	var wg sync.WaitGroup
	for w := range 4 {
		wg.Go(func() {
			for i := 0; i < perWorker && !s.Proc.Exited(); i++ {
				key := uuid.NewString()
				if retry && i%3 == 2 { // the retry of a command that got 503
					refusedKeys.Range(func(k, _ any) bool { key = k.(string); return false })
				}
				sentAfterFailure := failed.Load()
				r, err := create(key)
				if err != nil {
					return // the server is gone
				}
				switch {
				case r.Status == http.StatusServiceUnavailable:
					failed.Store(true)
					refusedKeys.Store(key, true)
				case r.Status/100 == 2 && sentAfterFailure:
					after2xx.Add(1)
					t.Errorf("worker %d: %d for a request sent after a 503: %s", w, r.Status, r.Body)
				case r.Status/100 == 2:
					mu.Lock()
					*acked = append(*acked, ackedCreate{key, r.JSON()["id"].(string)})
					mu.Unlock()
				default:
					t.Errorf("worker %d: %s", w, r)
				}
			}
		})
	}
	wg.Wait()
	return failed.Load(), after2xx.Load()
}

// waitTraced waits until every thread of pid is traced (TracerPid set in
// /proc/PID/task/*/status), so no fdatasync escapes the injection.
func waitTraced(t *testing.T, pid int) {
	t.Helper()
	for i := 0; ; i++ {
		out, _ := exec.Command("sh", "-c", fmt.Sprintf("grep -h '^TracerPid:' /proc/%d/task/*/status", pid)).Output()
		if len(out) > 0 && !bytes.Contains(out, []byte("TracerPid:\t0\n")) {
			return
		}
		if i > 5000 {
			t.Fatalf("strace did not attach to %d: %s", pid, out)
		}
		_ = exec.Command("sleep", "0.01").Run() // waiting on another process's state: no signal to wait on
	}
}
