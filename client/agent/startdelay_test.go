//go:build unix

package agent

import (
	"net/http"
	"os"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"

	"taskledger/client/internal/faultproxy"
	"taskledger/node/nodetest/proc"
)

// dropFirst drops the answer of the first request whose path ends with
// suffix (the server commits it).
func dropFirst(suffix string) func(int, *http.Request) faultproxy.Action {
	var mu sync.Mutex
	done := false
	return func(_ int, r *http.Request) faultproxy.Action {
		mu.Lock()
		defer mu.Unlock()
		if !done && strings.HasSuffix(r.URL.Path, suffix) {
			done = true
			return faultproxy.Drop
		}
		return faultproxy.Pass
	}
}

func (w *world) runDelayed(t *testing.T, extra ...string) *proc.Proc {
	t.Helper()
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	args := append([]string{"run", "--state", w.state, "--exec", strconv.Quote(self) + " " + helperArg,
		"--poll", "50ms", "--heartbeat", "100ms"}, extra...)
	return proc.Start(t, nil, bins.Agent, args...)
}

// With --start-delay the agent holds the claim and renews its lease while
// it waits; the first renew's answer is lost and it is replayed with the
// same key: the server holds exactly one task.claim_renewed per key.
func TestStartDelayRenewsAndReplaysLostRenew(t *testing.T) {
	w := newWorldPlan(t, dropFirst("/lease/renew"))
	task := w.task(t, "ok", 1, 0)
	a := w.runDelayed(t, "--start-delay", "600ms", "--renew-every", "100ms")
	a.WaitLine(t, 0, "waiting before start", "task="+task)
	a.WaitLine(t, 0, "claim renewed", "task="+task, "replayed=true")
	a.WaitLine(t, 0, "task finished", "task="+task, "outcome=SUCCEEDED")
	a.Signal(syscall.SIGTERM)
	if code := a.Wait(t); code != 0 {
		t.Fatalf("agent exit %d:\n%s", code, a.Stderr())
	}
	var renews []faultproxy.Seen
	for _, s := range w.proxy.Seen() {
		if strings.HasSuffix(s.Path, "/lease/renew") {
			renews = append(renews, s)
		}
	}
	if len(renews) < 2 || renews[0].Key != renews[1].Key || renews[0].ClaimToken != renews[1].ClaimToken {
		t.Fatalf("renews %+v: the lost one was not replayed with its key", renews)
	}
	keys := map[string]bool{}
	for _, s := range renews {
		keys[s.Key] = true
	}
	if n := w.srv.Count(t, "task.claim_renewed", task); n != len(keys) {
		t.Fatalf("server has %d task.claim_renewed for %d keys", n, len(keys))
	}
}

// A claim whose lease expires while the agent waits before start is never
// revived: the renew is refused (lease_expired), nothing runs, and the
// agent logs that it claims again (under reclaim: generation 2).
func TestStartDelayClaimExpiresWhileWaiting(t *testing.T) {
	w := newWorld(t)
	task := w.task(t, "ok", 1, 0)
	a := w.runDelayed(t, "--start-delay", "1h", "--renew-every", "300ms")
	a.WaitLine(t, 0, "waiting before start", "task="+task)
	w.srv.Advance(t, 600) // the claim lease ends (the agent's own clock barely moved)
	_, lost := a.WaitLine(t, 0, "claim lost while waiting before start", "task="+task, "lease_expired")
	// The agent claims again: a new generation, never the old claim revived.
	a.WaitLine(t, lost+1, "waiting before start", "task="+task)
	if c, _ := w.srv.Task(t, task)["claim"].(map[string]any); c == nil || c["generation"] != float64(2) {
		t.Fatalf("after the expiry: claim %v, want generation 2", c)
	}
	if w.runCount(t) != 0 {
		t.Fatal("the work command ran for a claim that was never started")
	}
	a.Signal(syscall.SIGTERM)
	_, i := a.WaitLine(t, lost, "signal: no new claim")
	a.Signal(syscall.SIGTERM) // leave at once; the claim is kept for the next start
	a.WaitLine(t, i, "second signal")
	if code := a.Wait(t); code != 0 {
		t.Fatalf("agent exit %d:\n%s", code, a.Stderr())
	}
}

// Under an authorization with takeover "manual", a claim whose lease
// expires while the agent waits before start needs a person: the agent
// records it (agent status lists it with lease_expired), runs nothing and
// exits 3; the server shows the task as needing an operator.
func TestStartDelayManualTakeoverNeedsPerson(t *testing.T) {
	w := newWorld(t)
	m := w.srv.MustDo(t, http.MethodPost, "/admin/tasks", map[string]any{"payload": map[string]any{"mode": "ok", "n": 1, "runs": w.runs}})
	task := m["id"].(string)
	w.srv.MustDo(t, http.MethodPost, "/admin/tasks/"+task+"/authorize",
		map[string]any{"expected_revision": 1, "ttl_seconds": 3600, "takeover": "manual"})
	a := w.runDelayed(t, "--start-delay", "1h", "--renew-every", "300ms")
	a.WaitLine(t, 0, "waiting before start", "task="+task)
	w.srv.Advance(t, 600)
	if code := a.Wait(t); code != ExitNeedsPerson {
		t.Fatalf("exit %d, want %d:\n%s", code, ExitNeedsPerson, a.Stderr())
	}
	if w.runCount(t) != 0 {
		t.Fatal("the work command ran")
	}
	np, _ := w.status(t)["needs_person"].([]any)
	if len(np) != 1 || np[0].(map[string]any)["task_id"] != task || np[0].(map[string]any)["code"] != "lease_expired" {
		t.Fatalf("status needs_person %v", np)
	}
	if d := w.srv.Task(t, task); d["needs_operator"] != true || d["state"] != "CLAIMED" {
		t.Fatalf("server task %v", d)
	}
}

// --start-when: the claim is held (and renewed) until the precondition
// command exits 0; only then does the work start.
func TestStartWhenPrecondition(t *testing.T) {
	w := newWorld(t)
	gate := w.dir + "/gate"
	task := w.task(t, "ok", 1, 0)
	a := w.runDelayed(t, "--start-when", "test -f "+strconv.Quote(gate), "--renew-every", "100ms")
	a.WaitLine(t, 0, "start precondition not met", "task="+task)
	a.WaitLine(t, 0, "claim renewed", "task="+task)
	if w.runCount(t) != 0 || w.srv.Task(t, task)["state"] != "CLAIMED" {
		t.Fatal("the task started before its precondition held")
	}
	if err := os.WriteFile(gate, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	a.WaitLine(t, 0, "task finished", "task="+task, "outcome=SUCCEEDED")
	a.Signal(syscall.SIGTERM)
	if code := a.Wait(t); code != 0 {
		t.Fatalf("agent exit %d:\n%s", code, a.Stderr())
	}
	if w.runCount(t) != 1 {
		t.Fatalf("runs %d", w.runCount(t))
	}
	// A precondition that cannot be split like a shell would is refused.
	code, _, errs := proc.Run(t, bins.Agent, "run", "--state", w.state, "--exec", "true", "--start-when", `"unterminated`)
	if code == 0 || !strings.Contains(errs, "--start-when") {
		t.Fatalf("bad --start-when: %d %q", code, errs)
	}
	code, _, errs = proc.Run(t, bins.Agent, "run", "--state", w.state, "--exec", "true", "--renew-every", "1ms")
	if code != ExitUsage || !strings.Contains(errs, "--renew-every") {
		t.Fatalf("bad --renew-every: %d %q", code, errs)
	}
}
