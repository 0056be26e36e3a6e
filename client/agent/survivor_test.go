//go:build linux

package agent

import (
	"errors"
	"os/exec"
	"syscall"
	"testing"
)

// Field 22 is counted after the last ')' of the command name, which may
// hold spaces and parentheses.
func TestParseProcStat(t *testing.T) {
	line := "4242 (a) b (c) S 1 4242 4242 0 -1 4194560 100 0 0 0 1 2 0 0 20 0 1 0 987654 1000 10\n"
	s, err := parseProcStat([]byte(line))
	if err != nil || s.state != 'S' || s.startTime != 987654 {
		t.Fatalf("%+v %v", s, err)
	}
	for _, bad := range []string{"", "4242 (a S 1", "4242 (a) S 1 2 3", "4242 (a) S 1 4242 4242 0 -1 4194560 100 0 0 0 1 2 0 0 20 0 1 0 x 1"} {
		if _, err := parseProcStat([]byte(bad)); !errors.Is(err, errBadProcStat) {
			t.Fatalf("%q: %v", bad, err)
		}
	}
}

// killSurvivor kills only a process whose pid and start time both match,
// with its process group; a gone pid is reported gone.
func TestKillSurvivorOnlyOnMatchingStartTime(t *testing.T) {
	cmd := exec.Command("sleep", "600")
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
	pid := cmd.Process.Pid
	start, err := processStartTime(pid)
	if err != nil || start == 0 {
		t.Fatalf("start time %d %v", start, err)
	}
	if fate, err := killSurvivor(pid, start+1); err != nil || fate != survivorReused {
		t.Fatalf("other start time: %v %v", fate, err)
	}
	if fate, err := killSurvivor(pid, 0); err != nil || fate != survivorUnknown {
		t.Fatalf("no start time: %v %v", fate, err)
	}
	if err := syscall.Kill(pid, 0); err != nil {
		t.Fatalf("a process with another start time was killed: %v", err)
	}
	if fate, err := killSurvivor(pid, start); err != nil || fate != survivorKilled {
		t.Fatalf("matching: %v %v", fate, err)
	}
	err = cmd.Wait()
	var ee *exec.ExitError
	if !errors.As(err, &ee) || ee.Sys().(syscall.WaitStatus).Signal() != syscall.SIGKILL {
		t.Fatalf("survivor ended with %v, want SIGKILL", err)
	}
	if fate, err := killSurvivor(pid, start); err != nil || fate != survivorGone {
		t.Fatalf("after exit: %v %v", fate, err)
	}
}
