//go:build unix

package agent

import (
	"strconv"
	"strings"
	"syscall"
	"testing"

	"taskledger/node/nodetest/proc"
)

// A false readiness check: presence says not claimable, nothing is claimed,
// and a signal stops the idle agent at once with exit 0.
func TestNotReadyClaimsNothing(t *testing.T) {
	w := newWorld(t)
	w.task(t, "ok", 1, 0)
	a := proc.Start(t, nil, bins.Agent, "run", "--state", w.state, "--exec", "true", "--poll", "50ms",
		"--check", "agent_running=false", "--check", "other_check=true")
	a.WaitLine(t, 0, "device not claimable", "agent_running")
	a.Signal(syscall.SIGINT)
	if code := a.Wait(t); code != 0 {
		t.Fatalf("exit %d:\n%s", code, a.Stderr())
	}
	if n := len(w.claimSeen()); n != 0 {
		t.Fatalf("%d claims while not ready", n)
	}
}

// Output that is not a JSON object fails the task; a running lease that
// expires stops the command at once and hands the task to a person.
func TestBadOutputAndLeaseExpiry(t *testing.T) {
	w := newWorld(t)
	badOut := w.task(t, "bad", 1, 0)
	block := w.task(t, "block", 2, 0)
	a := w.run(t)
	a.WaitLine(t, 0, "task finished", "task="+badOut, "outcome=FAILED")
	if d := w.srv.Task(t, badOut); d["failure"].(map[string]any)["reason_code"] != "invalid_output" {
		t.Fatalf("%v", d["failure"])
	}
	line, _ := a.WaitLine(t, 0, "work launched", "task="+block)
	killWork(t, line)
	a.WaitLine(t, 0, "helper running mode=block n=2")
	w.srv.Advance(t, 91) // past the 90 s running lease
	if code := a.Wait(t); code != ExitNeedsPerson {
		t.Fatalf("exit %d:\n%s", code, a.Stderr())
	}
	if !strings.Contains(a.Stderr(), "lease_expired") || !strings.Contains(a.Stderr(), "the command was stopped") {
		t.Fatalf("lease expiry not reported:\n%s", a.Stderr())
	}
	// The command really was stopped (killed), not left running.
	m := pidRE.FindStringSubmatch(line)
	pid, _ := strconv.Atoi(m[1])
	if err := syscall.Kill(pid, 0); err == nil {
		t.Fatalf("the command (pid %d) still runs", pid)
	}
	st := w.status(t)
	np := st["needs_person"].([]any)
	if len(np) != 1 || np[0].(map[string]any)["task_id"] != block || np[0].(map[string]any)["code"] != "lease_expired" {
		t.Fatalf("status: %v", st)
	}
}

// Command-line handling: flags before or after positional arguments, usage
// errors, resolve of something unknown.
func TestCommandLine(t *testing.T) {
	dir := t.TempDir()
	cases := []struct {
		args []string
		code int
		err  string
	}{
		{nil, ExitUsage, "usage"},
		{[]string{"bogus"}, ExitUsage, "unknown command"},
		{[]string{"run", "--state", dir}, ExitUsage, "--exec"},
		{[]string{"run", "--state", dir, "--exec", "x", "--check", "nope"}, ExitUsage, "NAME=true|false"},
		{[]string{"run", "--state", dir, "--exec", "x"}, ExitError, "not enrolled"},
		{[]string{"resolve", "--state", dir}, ExitUsage, "resolve TASK_ID"},
		{[]string{"resolve", "1c2d3e4f-5a6b-4c7d-8e9f-0a1b2c3d4e5f", "--state", dir}, ExitError, "nothing needs a person"},
		{[]string{"enroll", "--state", dir, "--server", "http://example.com", "--device-id", "1c2d3e4f-5a6b-4c7d-8e9f-0a1b2c3d4e5f", "--token-file", "/dev/null"}, ExitError, "plain http"},
		{[]string{"enroll", "--state", dir, "--server", "https://u:p@example.com", "--device-id", "1c2d3e4f-5a6b-4c7d-8e9f-0a1b2c3d4e5f", "--token-file", "/dev/null"}, ExitError, "user info"},
	}
	for _, tc := range cases {
		var out, errb strings.Builder
		code := Main(tc.args, &out, &errb)
		if code != tc.code || !strings.Contains(errb.String()+out.String(), tc.err) {
			t.Errorf("%v: exit %d, %q", tc.args, code, errb.String())
		}
	}
	// Without --key-file (and no OS store: no session bus named, so no
	// Secret Service) enrollment refuses.
	t.Setenv("DBUS_SESSION_BUS_ADDRESS", "")
	t.Setenv("XDG_RUNTIME_DIR", t.TempDir())
	tf := dir + "/tok"
	writeFile(t, tf, "tldev_x")
	var out, errb strings.Builder
	code := Main([]string{"enroll", "--server", "http://127.0.0.1:9", "--device-id", "1c2d3e4f-5a6b-4c7d-8e9f-0a1b2c3d4e5f",
		"--token-file", tf, "--state", dir}, &out, &errb)
	if code != ExitError || !strings.Contains(errb.String(), "--key-file") {
		t.Fatalf("enroll without key source: %d %q", code, errb.String())
	}
	// status works on a fresh state and prints no secret.
	out.Reset()
	if code := Main([]string{"status", "--state", dir}, &out, &errb); code != 0 || !strings.Contains(out.String(), "enrolled:   no") {
		t.Fatalf("status: %d %q", code, out.String())
	}
}

// SIGTERM while a task runs stops only the next claim: the running task
// is carried to its end (here: a cancel, acknowledged), the next pending
// task is not claimed, and the agent exits 0.
func TestSignalStopsOnlyTheNextClaim(t *testing.T) {
	w := newWorld(t)
	block := w.task(t, "block", 1, 0)
	next := w.task(t, "ok", 2, 0)
	a := w.run(t)
	line, _ := a.WaitLine(t, 0, "work launched", "task="+block)
	killWork(t, line)
	a.WaitLine(t, 0, "helper running mode=block")
	a.Signal(syscall.SIGTERM)
	a.WaitLine(t, 0, "signal: no new claim")
	w.srv.MustDo(t, "POST", "/admin/tasks/"+block+"/cancel", map[string]any{"reason": "stop"})
	a.WaitLine(t, 0, "task finished", "task="+block, "outcome=CANCELED")
	if code := a.Wait(t); code != 0 {
		t.Fatalf("exit %d:\n%s", code, a.Stderr())
	}
	if d := w.srv.Task(t, next); d["state"] != "PENDING" {
		t.Fatalf("next task %v", d["state"])
	}
	if n := len(w.claimSeen()); n != 1 {
		t.Fatalf("%d claims", n)
	}
}
