//go:build linux

package agent

import (
	"errors"
	"os/exec"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"taskledger/client/localstate"
)

// gone reports whether pid no longer runs (missing, or a zombie nobody
// reaped yet) or runs with another start time.
func gone(pid int, start uint64) bool {
	s, err := readProcStat(pid)
	return err != nil || s.state == 'Z' || s.state == 'X' || s.startTime != start
}

// SIGKILL of `agent run` mid-task: its work command dies with it (the
// parent-death signal), within a second; the restart reports the task as
// interrupted and kills nothing else.
func TestWorkCommandDiesWithAgent(t *testing.T) {
	w := newWorld(t)
	task := w.task(t, "block", 1, 0)
	a := w.run(t)
	line, _ := a.WaitLine(t, 0, "work launched", "task="+task)
	killWork(t, line)
	a.WaitLine(t, 0, "helper running mode=block n=1")
	pid, _ := strconv.Atoi(pidRE.FindStringSubmatch(line)[1])
	start, err := processStartTime(pid)
	if err != nil {
		t.Fatalf("work command pid %d: %v", pid, err)
	}
	a.Signal(syscall.SIGKILL)
	a.Wait(t)
	// Bounded poll of /proc: the brief's "gone within a second".
	deadline := time.Now().Add(time.Second)
	for !gone(pid, start) {
		if time.Now().After(deadline) {
			t.Fatalf("the work command (pid %d) still runs a second after the agent was killed", pid)
		}
		time.Sleep(10 * time.Millisecond)
	}
	// The state recorded the command before it ran.
	act, _ := w.status(t)["active"].(map[string]any)
	if act == nil || act["launched"] != true {
		t.Fatalf("status after the kill: %v", w.status(t))
	}
	s := openState(t, w)
	if s.Active.WorkPID != pid || s.Active.WorkStartTime != start {
		t.Fatalf("recorded pid %d start %d, ran pid %d start %d", s.Active.WorkPID, s.Active.WorkStartTime, pid, start)
	}
	b := w.run(t)
	if code := b.Wait(t); code != ExitNeedsPerson {
		t.Fatalf("restart exit %d:\n%s", code, b.Stderr())
	}
	if !strings.Contains(b.Stderr(), "the work command of the previous run is gone") {
		t.Fatalf("restart did not check the recorded command:\n%s", b.Stderr())
	}
	np := w.status(t)["needs_person"].([]any)
	if len(np) != 1 || np[0].(map[string]any)["task_id"] != task || np[0].(map[string]any)["code"] != "interrupted" {
		t.Fatalf("needs a person: %v", np)
	}
}

func openState(t *testing.T, w *world) *localstate.State {
	t.Helper()
	st, err := localstate.Open(w.state)
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	s, err := st.Load()
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// At start the agent kills a work command a previous run left running —
// only when the recorded pid and start time both match — before it sends
// anything, and reports the task as interrupted. A survivor is simulated:
// a process of the test's own, recorded as the launched task's command.
func TestStartKillsSurvivorOfPreviousRun(t *testing.T) {
	w := newWorld(t)
	task := w.task(t, "block", 1, 0)
	a := w.run(t)
	line, _ := a.WaitLine(t, 0, "work launched", "task="+task)
	killWork(t, line)
	a.WaitLine(t, 0, "helper running mode=block n=1")
	a.Signal(syscall.SIGKILL)
	a.Wait(t)

	surv := exec.Command("sleep", "600")
	surv.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := surv.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = surv.Process.Kill(); _ = surv.Wait() })
	pid := surv.Process.Pid
	start, err := processStartTime(pid)
	if err != nil {
		t.Fatal(err)
	}
	saved := *openState(t, w).Active
	record := func(st uint64) {
		t.Helper()
		s, err := localstate.Open(w.state)
		if err != nil {
			t.Fatal(err)
		}
		defer s.Close()
		cur, _ := s.Load()
		act := saved
		act.WorkPID, act.WorkStartTime = pid, st
		ch := localstate.Change{Active: &act}
		if len(cur.Manual) > 0 {
			ch.Resolve = cur.Manual[0].ID
		}
		if err := s.Apply(ch); err != nil {
			t.Fatal(err)
		}
	}

	// The pid was reused by another process (another start time): not
	// touched.
	record(start + 1)
	b := w.run(t)
	if code := b.Wait(t); code != ExitNeedsPerson {
		t.Fatalf("exit %d:\n%s", code, b.Stderr())
	}
	if err := syscall.Kill(pid, 0); err != nil || gone(pid, start) {
		t.Fatalf("a process whose start time differs was killed")
	}
	if !strings.Contains(b.Stderr(), "now belongs to another process; not touched") {
		t.Fatalf("log:\n%s", b.Stderr())
	}

	// Same pid and start time: killed before anything is sent, and the
	// task is reported as interrupted.
	record(start)
	// (Counted from here: a heartbeat of the killed agent may still have
	// been on its way through the proxy during the first restart.)
	before := len(w.proxy.Seen())
	c := w.run(t)
	if code := c.Wait(t); code != ExitNeedsPerson {
		t.Fatalf("exit %d:\n%s", code, c.Stderr())
	}
	err = surv.Wait()
	var ee *exec.ExitError
	if !errors.As(err, &ee) || ee.Sys().(syscall.WaitStatus).Signal() != syscall.SIGKILL {
		t.Fatalf("survivor: %v, want killed by SIGKILL\n%s", err, c.Stderr())
	}
	log := c.Stderr()
	if !strings.Contains(log, "killed the work command the previous run left running") ||
		strings.Index(log, "killed the work command") > strings.Index(log, "task needs a person") {
		t.Fatalf("log:\n%s", log)
	}
	if n := len(w.proxy.Seen()); n != before {
		t.Fatalf("%d requests sent by a restart that had a task needing a person: %+v", n-before, w.proxy.Seen()[before:])
	}
	np := w.status(t)["needs_person"].([]any)
	if len(np) != 1 || np[0].(map[string]any)["code"] != "interrupted" ||
		!strings.Contains(np[0].(map[string]any)["reason"].(string), "was still running and was killed") {
		t.Fatalf("needs a person: %v", np)
	}
}
