//go:build unix

package agent

import (
	"strings"
	"syscall"
	"testing"

	"taskledger/client/internal/faultproxy"
	"taskledger/node/nodetest/proc"
)

func (w *world) claimSeen() []faultproxy.Seen {
	var out []faultproxy.Seen
	for _, s := range w.proxy.Seen() {
		if strings.HasSuffix(s.Path, "/claim-next") {
			out = append(out, s)
		}
	}
	return out
}

// pendingClaimKey is the claim key `agent status` shows as pending.
func pendingClaimKey(t *testing.T, w *world) string {
	t.Helper()
	p, _ := w.status(t)["pending"].(map[string]any)
	if p == nil || p["kind"] != "claim" {
		t.Fatalf("no pending claim in status: %v", w.status(t))
	}
	return p["key"].(string)
}

// runToIdle restarts the agent, waits for task to finish and the agent to
// go idle, then stops it with SIGTERM.
func runToIdle(t *testing.T, w *world, task string) string {
	t.Helper()
	a := w.run(t)
	a.WaitLine(t, 0, "task finished", "task="+task)
	a.WaitLine(t, 0, "no task")
	a.Signal(syscall.SIGTERM)
	if code := a.Wait(t); code != 0 {
		t.Fatalf("agent exit %d:\n%s", code, a.Stderr())
	}
	return a.Stderr()
}

// (i) SIGKILL after the claim was persisted and before it was sent: the
// restart sends the persisted key; the server shows one claim.
func TestCrashBeforeClaimSent(t *testing.T) {
	w := newWorld(t)
	task := w.task(t, "ok", 1, 0)
	a := w.run(t, "TASKLEDGER_FAILPOINTS=claim-before-send")
	a.Wait(t)
	if !a.Killed() {
		t.Fatalf("agent was not killed at the failpoint:\n%s", a.Stderr())
	}
	if n := len(w.claimSeen()); n != 0 {
		t.Fatalf("%d claims sent before the crash", n)
	}
	key := pendingClaimKey(t, w)
	runToIdle(t, w, task)
	c := w.claimSeen()
	if c[0].Key != key {
		t.Fatal("the restart did not send the persisted key")
	}
	if n := w.srv.Count(t, "task.claimed", ""); n != 1 {
		t.Fatalf("%d claims on the server", n)
	}
	if d := w.srv.Task(t, task); d["state"] != "SUCCEEDED" || w.runCount(t) != 1 {
		t.Fatalf("%v, %d runs", d["state"], w.runCount(t))
	}
}

// (ii) SIGKILL after the server committed the claim and before the client
// stored it: the restart replays the key and recovers the same claim and
// generation; one claim on the server.
func TestCrashAfterClaimCommitted(t *testing.T) {
	w := newWorld(t)
	task := w.task(t, "ok", 2, 0)
	a := w.run(t, "TASKLEDGER_FAILPOINTS=claim-after-response")
	a.Wait(t)
	if !a.Killed() {
		t.Fatalf("agent was not killed at the failpoint:\n%s", a.Stderr())
	}
	if n := w.srv.Count(t, "task.claimed", task); n != 1 {
		t.Fatalf("server has %d claims before the restart", n)
	}
	key := pendingClaimKey(t, w)
	log := runToIdle(t, w, task)
	if !strings.Contains(log, "msg=claimed task="+task+" generation=1 replayed=true") {
		t.Fatalf("claim not recovered by replay:\n%s", log)
	}
	c := w.claimSeen()
	if len(c) < 2 || c[0].Key != key || c[1].Key != key || c[0].ClaimToken != c[1].ClaimToken {
		t.Fatalf("replay did not reuse the key and token: %+v", c)
	}
	if n := w.srv.Count(t, "task.claimed", ""); n != 1 {
		t.Fatalf("%d claims on the server", n)
	}
	if d := w.srv.Task(t, task); d["state"] != "SUCCEEDED" || w.runCount(t) != 1 {
		t.Fatalf("%v, %d runs", d["state"], w.runCount(t))
	}
}

// (iii) SIGKILL while the command runs: the restart does not run it again
// and claims nothing; status names the task; a server switch is refused;
// after recover on the server and `agent resolve` the agent works again.
func TestCrashWhileRunning(t *testing.T) {
	w := newWorld(t)
	task := w.task(t, "block", 3, 0)
	a := w.run(t)
	line, _ := a.WaitLine(t, 0, "work launched", "task="+task)
	killWork(t, line)
	a.WaitLine(t, 0, "helper running mode=block n=3")
	a.Signal(syscall.SIGKILL)
	a.Wait(t)

	b := w.run(t)
	if code := b.Wait(t); code != ExitNeedsPerson {
		t.Fatalf("restart exit %d:\n%s", code, b.Stderr())
	}
	if !strings.Contains(b.Stderr(), task) || !strings.Contains(b.Stderr(), "needs a person") {
		t.Fatalf("restart does not name the task:\n%s", b.Stderr())
	}
	// Once more: still nothing claimed, nothing run.
	c := w.run(t)
	if code := c.Wait(t); code != ExitNeedsPerson {
		t.Fatalf("second restart exit %d", code)
	}
	if n := w.runCount(t); n != 1 {
		t.Fatalf("the command ran %d times", n)
	}
	if n := len(w.claimSeen()); n != 1 {
		t.Fatalf("%d claims sent", n)
	}
	code, out, _ := proc.Run(t, bins.Agent, "status", "--state", w.state)
	if code != 0 || !strings.Contains(out, "NEEDS A PERSON: "+task) {
		t.Fatalf("status:\n%s", out)
	}
	// The identity cannot change now.
	code, _, errs := proc.Run(t, bins.Agent, "enroll", "--state", w.state, "--server", "https://other.example",
		"--device-id", w.deviceID, "--token-file", "/dev/null")
	if code == 0 {
		t.Fatalf("enroll switched identity (stderr %q)", errs)
	}
	tf := w.dir + "/tok2"
	writeFile(t, tf, w.token)
	code, _, errs = proc.Run(t, bins.Agent, "enroll", "--state", w.state, "--server", "https://other.example",
		"--device-id", w.deviceID, "--token-file", tf)
	if code == 0 || !strings.Contains(errs, "identity cannot change") {
		t.Fatalf("server switch: %d %q", code, errs)
	}
	// The operator recovers the task on the server (its running lease must
	// have expired first), then the person resolves it locally.
	w.srv.Advance(t, 91)
	d := w.srv.Task(t, task)
	w.srv.MustDo(t, "POST", "/admin/tasks/"+task+"/recover", map[string]any{"decision": "fail", "reason": "agent crashed",
		"expected_version": d["version"]})
	if code, out, errs := proc.Run(t, bins.Agent, "resolve", task, "--state", w.state); code != 0 {
		t.Fatalf("resolve: %d %s %s", code, out, errs)
	}
	next := w.task(t, "ok", 4, 0)
	runToIdle(t, w, next)
	if d := w.srv.Task(t, next); d["state"] != "SUCCEEDED" {
		t.Fatalf("after resolve: %v", d["state"])
	}
	if n := w.srv.Count(t, "task.claimed", task); n != 1 {
		t.Fatalf("the crashed task was claimed %d times", n)
	}
}
