package api_test

// The boundary: now == expires_at is expired, for claim leases,
// running leases, authorizations and presence — each its own test, with
// the moment just before as a control.

import (
	"testing"
	"time"

	"taskledger/node/nodetest"
)

func TestBoundaryClaimLease(t *testing.T) {
	n := nodetest.Start(t)
	d := n.ReadyDevice(t)
	before := n.ReadyDevice(t)
	a := n.CreateTask(map[string]any{"n": "a"})
	b := n.CreateTask(map[string]any{"n": "b"})
	_, tokA, claim7 := d.MustClaim(t)
	m := claim7.JSON()
	leaseA := nodetest.Millis(t, m["lease_expires_at"])
	_, tokB, _ := before.MustClaim(t)

	// One second before: valid.
	n.AdvanceTo(t, leaseA-1000)
	nodetest.Must(t, before.Start(b, tokB, 1, 2), 200)

	// At lease_expires_at: expired, for every call of the holder.
	n.AdvanceTo(t, leaseA)
	head := n.Head()
	nodetest.Must(t, d.Start(a, tokA, 1, 2), 409, "lease_expired")
	nodetest.Must(t, d.Renew(a, tokA, 1, d.Session, leaseA, ""), 409, "lease_expired")
	nodetest.Must(t, d.Call(a, "release", tokA, map[string]any{"claim_generation": 1, "expected_version": 2}, ""), 409, "lease_expired")
	if n.Head() != head {
		t.Fatal("calls on an expired claim appended events")
	}
	// … and the task is claimable by another device at that very moment.
	other := n.ReadyDevice(t)
	got, _, claim8 := other.MustClaim(t)
	m = claim8.JSON()
	if got != a || nodetest.Num(m, "claim_generation") != 2 {
		t.Fatalf("at the claim lease's expiry: claimed %s generation %v", got, m["claim_generation"])
	}
}

func TestBoundaryRunningLease(t *testing.T) {
	n := nodetest.Start(t)
	d := n.ReadyDevice(t)
	id := n.CreateTask(nil)
	_, tok, _ := d.MustClaim(t)
	s := d.Start(id, tok, 1, 2)
	nodetest.Must(t, s, 200)
	exec := nodetest.Str(s.JSON(), "execution_id")
	running := nodetest.Millis(t, s.JSON()["lease_expires_at"])
	recover := map[string]any{"decision": "fail", "reason": "silent", "expected_version": 3}

	// One second before: valid (the operator may not recover yet).
	n.AdvanceTo(t, running-1000)
	nodetest.Must(t, n.Admin("POST", "/tasks/"+id+"/recover", recover), 409, "lease_not_expired")
	hb := d.Call(id, "heartbeat", tok, map[string]any{"claim_generation": 1, "execution_id": exec, "step": "one"}, "")
	nodetest.Must(t, hb, 200)
	running = nodetest.Millis(t, hb.JSON()["lease_expires_at"])

	// At lease_expires_at: expired.
	n.AdvanceTo(t, running)
	head := n.Head()
	nodetest.Must(t, d.Call(id, "heartbeat", tok, map[string]any{"claim_generation": 1, "execution_id": exec, "step": "two"}, ""),
		409, "lease_expired")
	if n.Head() != head {
		t.Fatal("a heartbeat on an expired running lease appended an event")
	}
	// complete is refused but kept as a late report.
	nodetest.Must(t, d.Call(id, "complete", tok, map[string]any{"claim_generation": 1, "execution_id": exec, "expected_version": 3,
		"result": map[string]any{"ok": true}}, ""), 409, "lease_expired")
	task := n.Task(id)
	if task["state"] != "RUNNING" || len(task["late_reports"].([]any)) != 1 {
		t.Fatalf("after a late complete: %v", task)
	}
	// The operator may recover at that very moment.
	nodetest.Must(t, n.Admin("POST", "/tasks/"+id+"/recover", recover), 200)
}

func TestBoundaryAuthorization(t *testing.T) {
	n := nodetest.Start(t)
	d := n.ReadyDevice(t)
	task := n.CreateTaskFor(t, map[string]any{"n": 1}, 15*time.Minute)
	id := nodetest.Str(task, "id")
	exp := nodetest.Millis(t, nodetest.Obj(task, "authorization")["expires_at"])

	// One second before: claimable, with a claim lease of one second.
	n.AdvanceTo(t, exp-1000)
	nodetest.Must(t, d.Ready(), 200)
	_, tok, claim9 := d.MustClaim(t)
	m := claim9.JSON()
	if got := nodetest.Millis(t, m["lease_expires_at"]); got != exp {
		t.Fatalf("lease %s, want the authorization's expiry %s", nodetest.FormatMillis(got), nodetest.FormatMillis(exp))
	}

	// At expires_at: the authorization is expired, the claim with it.
	n.AdvanceTo(t, exp)
	nodetest.Must(t, d.Start(id, tok, 1, 2), 409, "lease_expired")
	if st := nodetest.Obj(n.Task(id), "authorization")["status"]; st != "EXPIRED" {
		t.Fatalf("authorization status %v at its expiry, want EXPIRED", st)
	}
	other := n.ReadyDevice(t)
	r, _ := other.Claim()
	nodetest.Must(t, r, 204)
	// Re-authorized, the stale claim closes and the task is claimable again.
	r = n.Authorize(id, 1, 15*time.Minute)
	nodetest.Must(t, r, 200)
	if r.JSON()["state"] != "PENDING" || nodetest.Num(r.JSON(), "version") != 3 {
		t.Fatalf("authorize of the expired claim: %s", r.Body)
	}
	if got, _, claim := other.MustClaim(t); got != id || nodetest.Num(claim.JSON(), "claim_generation") != 2 {
		t.Fatalf("claimed %s generation %v after re-authorization", got, m["claim_generation"])
	}

	// A PENDING task whose authorization reaches expires_at is not claimable.
	n2 := nodetest.Start(t)
	d2 := n2.ReadyDevice(t)
	task2 := n2.CreateTaskFor(t, map[string]any{"n": 2}, 15*time.Minute)
	n2.AdvanceTo(t, nodetest.Millis(t, nodetest.Obj(task2, "authorization")["expires_at"]))
	nodetest.Must(t, d2.Ready(), 200)
	r, _ = d2.Claim()
	nodetest.Must(t, r, 204)
	nodetest.Must(t, n2.Authorize(nodetest.Str(task2, "id"), 1, 15*time.Minute), 200)
	d2.MustClaim(t)
}

func TestBoundaryPresence(t *testing.T) {
	n := nodetest.Start(t)
	d1 := n.RegisterDevice()
	d2 := n.RegisterDevice()
	n.CreateTask(map[string]any{"n": 1})
	n.CreateTask(map[string]any{"n": 2})
	p1 := d1.Ready()
	nodetest.Must(t, p1, 200)
	exp1 := nodetest.Millis(t, p1.JSON()["presence_expires_at"])
	if exp1 != nodetest.Millis(t, p1.JSON()["server_time"])+(2*time.Minute).Milliseconds() {
		t.Fatalf("presence_expires_at %s is not server_time + 2m", nodetest.FormatMillis(exp1))
	}
	n.Advance(time.Second)
	nodetest.Must(t, d2.Ready(), 200)

	n.AdvanceTo(t, exp1) // d1 at its presence expiry, d2 one second before
	head := n.Head()
	key, tok := nodetest.NewKey(), nodetest.NewClaimToken()
	nodetest.Must(t, d1.ClaimWith(key, tok), 409, "device_not_ready")
	if n.Head() != head {
		t.Fatal("device_not_ready appended an event")
	}
	if p := nodetest.Obj(n.Admin("GET", "/devices/"+d1.ID, nil).JSON(), "presence"); p["claimable"] != false {
		t.Fatalf("device detail at presence expiry: %v", p)
	}
	if p := nodetest.Obj(n.Admin("GET", "/devices/"+d2.ID, nil).JSON(), "presence"); p["claimable"] != true {
		t.Fatalf("device detail one second before presence expiry: %v", p)
	}
	d2.MustClaim(t)
	// Not recorded: the same key claims once the device is ready again.
	nodetest.Must(t, d1.Ready(), 200)
	nodetest.Must(t, d1.ClaimWith(key, tok), 200)
}
