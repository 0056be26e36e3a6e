package main_test

// A real server whose wall clock is stepped from outside the process (a
// failpoints build adds the duration in a file to its wall clock): leases
// are judged on ledger time, which a step neither cuts nor freezes.

import (
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/google/uuid"

	"taskledger/internal/failpoint"
	"taskledger/node/nodetest"
	"taskledger/node/nodetest/proc"
)

func TestServerLeasesIgnoreWallClockSteps(t *testing.T) {
	shift := filepath.Join(t.TempDir(), "wall-shift")
	setShift := func(d string) {
		t.Helper()
		if err := os.WriteFile(shift, []byte(d), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	setShift("0s")
	dir := t.TempDir()
	s := proc.ServeEnv(t, []string{failpoint.WallShiftEnv + "=" + shift}, proc.Taskledger(t), dir,
		"--device-rate", "0", "--running-lease", "30s")
	c := proc.NewClient()
	device, token := s.NewDevice(t)
	task := s.NewTask(t, map[string]any{"n": 1})
	do := func(path string, body map[string]any, hdr map[string]string) map[string]any {
		t.Helper()
		body["device_id"] = device
		if hdr == nil {
			hdr = map[string]string{}
		}
		hdr["Idempotency-Key"] = uuid.NewString()
		r, err := c.Do(s.URL, "POST", "/api/v1/device/"+path, token, body, hdr)
		if err != nil || r.Status/100 != 2 {
			t.Fatalf("%s: %v %v", path, r, err)
		}
		return r.JSON()
	}
	do("heartbeat", map[string]any{"app_version": "1.0.0", "os_version": "Debian 12", "target_app_version": "1.0.0",
		"checks": map[string]bool{"agent_running": true}}, nil)
	claimTok := nodetest.NewClaimToken()
	claim := do("tasks/claim-next", map[string]any{"session_id": uuid.NewString()}, map[string]string{"X-Claim-Token": claimTok})
	call := func(op string, body map[string]any) map[string]any {
		t.Helper()
		body["claim_generation"] = 1
		return do("tasks/"+task+"/"+op, body, map[string]string{"X-Claim-Token": claimTok})
	}
	started := call("start", map[string]any{"expected_version": claim["version"]})
	exec := started["execution_id"]
	lease := func(m map[string]any) time.Time {
		t.Helper()
		at, err := time.Parse(time.RFC3339Nano, m["lease_expires_at"].(string))
		if err != nil {
			t.Fatal(err)
		}
		return at
	}
	l1 := lease(started)

	// Two hours forward: a heartbeat moments into a 30 s lease holds, and
	// its new lease is 30 s from ledger time, not from the stepped clock.
	setShift("2h")
	hb := call("heartbeat", map[string]any{"execution_id": exec, "step": "after a step forward"})
	l2 := lease(hb)
	if l2.Sub(l1) > 10*time.Second || l2.Before(l1) {
		t.Fatalf("lease %s after a step of +2h, was %s: ledger time followed the step", l2, l1)
	}

	// One hour back: ledger time goes on (it does not stand at the newest
	// event until the wall clock catches up), so a heartbeat a second
	// later extends the lease by about that second.
	setShift("-1h")
	time.Sleep(1100 * time.Millisecond) //tl:wallclock real time must pass for the server's elapsed clock
	l3 := lease(call("heartbeat", map[string]any{"execution_id": exec, "step": "after a step back"}))
	if d := l3.Sub(l2); d < time.Second || d > 10*time.Second {
		t.Fatalf("lease %s a second after a step of -1h, was %s: moved %s", l3, l2, d)
	}
	call("complete", map[string]any{"execution_id": exec, "expected_version": s.Task(t, task)["version"],
		"result": map[string]any{"ok": true}})
	if st := s.Task(t, task)["state"]; st != "SUCCEEDED" {
		t.Fatalf("state %v", st)
	}
	if code := s.Stop(t); code != 0 {
		t.Fatalf("serve exited %d", code)
	}
	if r := proc.CLI(t, "verify", "--data", dir); r.Code != 0 {
		t.Fatalf("verify: %d %s", r.Code, r.Stderr)
	}
}
