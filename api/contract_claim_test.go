package api_test

import (
	"net/http"
	"testing"
	"time"

	"taskledger/node/nodetest"
)

// presenceBody is a presence heartbeat reporting checks.
func presenceBody(d *nodetest.Device, checks map[string]bool) map[string]any {
	return map[string]any{"device_id": d.ID, "app_version": "1.4.2", "os_version": "Android 14",
		"target_app_version": "7.1.0", "checks": checks}
}

// Presence older than the presence TTL (2 min; equality is expired), no
// presence at all, or a required check that is false or missing → 409
// device_not_ready, nothing appended.
func TestContractClaimDeviceNotReady(t *testing.T) {
	n := nodetest.Start(t)
	id := n.CreateTask(nil)
	d := n.RegisterDevice()
	h := n.Head()
	n.MustRefuse(t, h, d.ClaimWith(nodetest.NewKey(), nodetest.NewClaimToken()), http.StatusConflict, "device_not_ready")

	// Presence TTL boundary: exactly 2 minutes old is stale.
	nodetest.Must(t, d.Ready(), http.StatusOK)
	n.Advance(2 * time.Minute)
	h = n.Head()
	n.MustRefuse(t, h, d.ClaimWith(nodetest.NewKey(), nodetest.NewClaimToken()), http.StatusConflict, "device_not_ready")

	// A default required check false, or not reported.
	for _, checks := range []map[string]bool{
		{"accessibility_connected": true, "target_app_installed": false},
		{"accessibility_connected": true},
		{"something_else": true},
	} {
		r := n.Do("POST", nodetest.Presence, d.Token, presenceBody(d, checks), nil)
		nodetest.Must(t, r, http.StatusOK)
		if m := r.JSON(); m["claimable"] != false || len(m["missing_checks"].([]any)) == 0 {
			t.Fatalf("presence answer for %v: %s", checks, r.Body)
		}
		n.MustRefuse(t, h, d.ClaimWith(nodetest.NewKey(), nodetest.NewClaimToken()), http.StatusConflict, "device_not_ready")
	}

	// One second inside the TTL is fine.
	nodetest.Must(t, d.Ready(), http.StatusOK)
	n.Advance(2*time.Minute - time.Second)
	r, _ := d.Claim()
	nodetest.Must(t, r, http.StatusOK)
	if nodetest.ClaimedTask(r) != id {
		t.Fatalf("claimed %s", nodetest.ClaimedTask(r))
	}

	// A device's own required checks replace the default.
	e := n.RegisterDevice("camera_ok")
	n.CreateTask(nil)
	r = n.Do("POST", nodetest.Presence, e.Token, presenceBody(e, map[string]bool{"camera_ok": false, "accessibility_connected": true,
		"target_app_installed": true}), nil)
	nodetest.Must(t, r, http.StatusOK)
	if m := r.JSON(); m["claimable"] != false || len(m["missing_checks"].([]any)) != 1 || m["missing_checks"].([]any)[0] != "camera_ok" {
		t.Fatalf("presence answer: %s", r.Body)
	}
	h = n.Head()
	n.MustRefuse(t, h, e.ClaimWith(nodetest.NewKey(), nodetest.NewClaimToken()), http.StatusConflict, "device_not_ready")
	r = n.Do("POST", nodetest.Presence, e.Token, presenceBody(e, map[string]bool{"camera_ok": true}), nil)
	nodetest.Must(t, r, http.StatusOK)
	if m := r.JSON(); m["claimable"] != true || len(m["missing_checks"].([]any)) != 0 {
		t.Fatalf("presence answer: %s", r.Body)
	}
	r, _ = e.Claim()
	nodetest.Must(t, r, http.StatusOK)
	// An empty required list needs no check at all.
	g := n.Do("POST", nodetest.AdminPath+"/devices", n.AdminToken, map[string]any{"owner_id": nodetest.NewID(), "name": "g", "required_checks": []string{}}, nil)
	nodetest.Must(t, g, http.StatusCreated)
	gd := &nodetest.Device{N: n, ID: nodetest.Str(g.JSON(), "device_id"), Token: nodetest.Str(g.JSON(), "token"), Session: nodetest.NewID()}
	r = n.Do("POST", nodetest.Presence, gd.Token, presenceBody(gd, map[string]bool{"anything": false}), nil)
	nodetest.Must(t, r, http.StatusOK)
	if r.JSON()["claimable"] != true {
		t.Fatalf("device with no required checks: %s", r.Body)
	}
}

// The session rule: the same session gets its open claim back
// (task.claim_resumed, same generation and version) with the same client
// token (another → 403 claim_token_mismatch); another session, or a
// started task → 409 claim_requires_manual, recorded (a replay answers the
// same 409 and appends nothing). The device never gets a second task.
func TestContractClaimSessionRule(t *testing.T) {
	n := nodetest.Start(t)
	d := n.ReadyDevice(t)
	a := n.CreateTask(nil)
	b := n.CreateTask(nil)
	first, tok := d.Claim()
	nodetest.Must(t, first, http.StatusOK)
	if nodetest.ClaimedTask(first) != a {
		t.Fatalf("claimed %s, want %s", nodetest.ClaimedTask(first), a)
	}

	// Resume: same session, same token, new key.
	n.Advance(time.Minute)
	nodetest.Must(t, d.Ready(), http.StatusOK)
	h := n.Head()
	r := d.ClaimWith(nodetest.NewKey(), tok)
	nodetest.Must(t, r, http.StatusOK)
	if n.Head() != h+1 {
		t.Fatalf("resume appended %d events, want 1", n.Head()-h)
	}
	fm, rm := first.JSON(), r.JSON()
	if nodetest.ClaimedTask(r) != a || nodetest.Num(rm, "claim_generation") != 1 || nodetest.Num(rm, "version") != 2 ||
		nodetest.Str(rm, "lease_expires_at") != nodetest.Str(fm, "lease_expires_at") || nodetest.Str(rm, "state") != "CLAIMED" {
		t.Fatalf("resumed claim %s differs from %s", r.Body, first.Body)
	}
	if _, has := rm["claim"].(map[string]any)["token"]; has {
		t.Fatalf("client-issued token echoed: %s", r.Body)
	}
	types := n.EventTypes(t, a)
	if types[len(types)-1] != "task.claim_resumed" {
		t.Fatalf("events %v", types)
	}

	// Same session, another token.
	h = n.Head()
	n.MustRefuse(t, h, d.ClaimWith(nodetest.NewKey(), nodetest.NewClaimToken()), http.StatusForbidden, "claim_token_mismatch")

	// Another session: recorded claim_requires_manual.
	sess, other := d.Session, nodetest.NewID()
	d.Session = other
	mk := nodetest.NewKey()
	man := d.ClaimWith(mk, tok)
	nodetest.MustError(t, man, http.StatusConflict, "claim_requires_manual")
	if n.Head() != h+1 {
		t.Fatalf("claim_requires_manual appended %d events, want 1", n.Head()-h)
	}
	h = n.Head()
	nodetest.MustReplay(t, man, d.ClaimWith(mk, tok))
	n.MustUnchanged(t, h)
	d.Session = sess
	if st, v := n.State(a); st != "CLAIMED" || v != 2 {
		t.Fatalf("task %s v%d", st, v)
	}
	if st, _ := n.State(b); st != "PENDING" {
		t.Fatalf("second task %s: the device got two tasks", st)
	}

	// Started: even the same session is refused.
	d.MustStart(t, a, tok, 1, 2)
	h = n.Head()
	sk := nodetest.NewKey()
	started := d.ClaimWith(sk, tok)
	nodetest.MustError(t, started, http.StatusConflict, "claim_requires_manual")
	if n.Head() != h+1 {
		t.Fatalf("claim_requires_manual appended %d events, want 1", n.Head()-h)
	}
	// The recorded refusal replays as recorded even once the cause is gone.
	nodetest.Must(t, n.Cancel(a), http.StatusOK)
	h = n.Head()
	nodetest.MustReplay(t, started, d.ClaimWith(sk, tok))
	d.Session = other
	nodetest.MustReplay(t, man, d.ClaimWith(mk, tok))
	n.MustUnchanged(t, h)
	if st, _ := n.State(b); st != "PENDING" {
		t.Fatalf("second task %s", st)
	}
}

// Selection takes the oldest claimable task (created_at, then creation
// seq), skipping tasks without an eligible authorization, canceled or
// claimed ones; a released task is older than later ones.
func TestContractClaimSelectionOldest(t *testing.T) {
	n := nodetest.Start(t)
	var ids []string
	unauth := n.Do("POST", nodetest.AdminPath+"/tasks", n.AdminToken, map[string]any{"payload": map[string]any{"u": 1}}, nil)
	nodetest.Must(t, unauth, http.StatusCreated)
	canceled := n.CreateTask(map[string]any{"c": 1})
	nodetest.Must(t, n.Cancel(canceled), http.StatusOK)
	for i := 0; i < 4; i++ {
		ids = append(ids, n.CreateTask(map[string]any{"i": i}))
		if i%2 == 0 {
			n.Advance(time.Second)
		}
	}
	devs := make([]*nodetest.Device, 5)
	for i := range devs {
		devs[i] = n.ReadyDevice(t)
	}
	got := []string{}
	toks := []string{}
	for _, d := range devs[:3] {
		id, tok, _ := d.MustClaim(t)
		got = append(got, id)
		toks = append(toks, tok)
	}
	for i := range got {
		if got[i] != ids[i] {
			t.Fatalf("claim %d got %s, want %s (order %v)", i, got[i], ids[i], ids)
		}
	}
	// The oldest is released: it is next again, before ids[3].
	nodetest.Must(t, devs[0].Call(ids[0], "release", toks[0], map[string]any{"claim_generation": 1, "expected_version": 2}, ""), http.StatusOK)
	id, _, r := devs[3].MustClaim(t)
	if id != ids[0] || nodetest.Num(r.JSON(), "claim_generation") != 2 {
		t.Fatalf("after release got %s, want %s gen 2", r.Body, ids[0])
	}
	id, _, _ = devs[4].MustClaim(t)
	if id != ids[3] {
		t.Fatalf("got %s, want %s", id, ids[3])
	}
	// Nothing else is claimable: the unauthorized and canceled tasks stay.
	r, _ = devs[0].Claim()
	nodetest.Must(t, r, http.StatusNoContent)
	// Authorizing the old task makes it claimable (it is the oldest).
	uid := nodetest.Str(unauth.JSON(), "id")
	nodetest.Must(t, n.Do("POST", nodetest.AdminPath+"/tasks/"+uid+"/authorize", n.AdminToken, map[string]any{"expected_revision": 1, "ttl_seconds": 900}, nil), http.StatusOK)
	id, _, _ = devs[0].MustClaim(t)
	if id != uid {
		t.Fatalf("got %s, want the newly authorized %s", id, uid)
	}
}

// The open task is decided before readiness: with stale presence the same
// session still gets its claim back and another session still gets
// claim_requires_manual (not device_not_ready). The presence answer
// reports the ledger's open task and a mismatch with the device's view.
func TestContractClaimOpenTaskBeforeReadiness(t *testing.T) {
	n := nodetest.Start(t)
	d := n.ReadyDevice(t)
	a := n.CreateTask(nil)
	_, tok, first := d.MustClaim(t)
	r := n.Do("POST", nodetest.Presence, d.Token, presenceBody(d, map[string]bool{"accessibility_connected": true, "target_app_installed": true}), nil)
	nodetest.Must(t, r, http.StatusOK)
	if m := r.JSON(); nodetest.Str(m, "active_task_id") != a || m["active_task_mismatch"] != true {
		t.Fatalf("presence answer: %s", r.Body)
	}
	body := presenceBody(d, map[string]bool{"accessibility_connected": true, "target_app_installed": true})
	body["active_task_id"] = a
	r = n.Do("POST", nodetest.Presence, d.Token, body, nil)
	if m := r.JSON(); nodetest.Str(m, "active_task_id") != a || m["active_task_mismatch"] != false {
		t.Fatalf("presence answer: %s", r.Body)
	}

	n.Advance(3 * time.Minute) // presence stale, claim lease (10 min) alive
	r = d.ClaimWith(nodetest.NewKey(), tok)
	nodetest.Must(t, r, http.StatusOK)
	if nodetest.ClaimedTask(r) != a || nodetest.Str(r.JSON(), "lease_expires_at") != nodetest.Str(first.JSON(), "lease_expires_at") {
		t.Fatalf("resume with stale presence: %s", r.Body)
	}
	d.Session = nodetest.NewID()
	r = d.ClaimWith(nodetest.NewKey(), tok)
	nodetest.MustError(t, r, http.StatusConflict, "claim_requires_manual")
}

// isWireTime checks the wire format of every time: RFC 3339 UTC with exactly
// three fractional digits.
func isWireTime(s string) bool {
	_, err := time.Parse("2006-01-02T15:04:05.000Z", s)
	return err == nil && len(s) == len("2026-11-30T08:15:00.123Z")
}

// The claim answer of api.md: task {id, payload, revision, created_at}
// (no reference_image_url without an image), claim {generation,
// session_id, lease_expires_at, authorization_expires_at} without a token
// for a client-issued one, and state/version/claim_generation/server_time/
// lease_expires_at; optional presence fields may be null.
func TestContractClaimAnswerShape(t *testing.T) {
	n := nodetest.Start(t)
	d := n.RegisterDevice()
	body := presenceBody(d, map[string]bool{"accessibility_connected": true, "target_app_installed": true})
	body["active_task_id"], body["client_time"] = nil, nil
	p := n.Do("POST", nodetest.Presence, d.Token, body, nil)
	nodetest.Must(t, p, http.StatusOK)
	pm := p.JSON()
	if pm["claimable"] != true || pm["active_task_id"] != nil || pm["active_task_mismatch"] != false ||
		!isWireTime(nodetest.Str(pm, "server_time")) || !isWireTime(nodetest.Str(pm, "presence_expires_at")) {
		t.Fatalf("presence answer: %s", p.Body)
	}
	a := n.CreateTask(map[string]any{"k": "v", "n": 2})
	r, _ := d.Claim()
	nodetest.Must(t, r, http.StatusOK)
	m := r.JSON()
	task, claim := m["task"].(map[string]any), m["claim"].(map[string]any)
	if len(task) != 4 || nodetest.Str(task, "id") != a || nodetest.Num(task, "revision") != 1 || !isWireTime(nodetest.Str(task, "created_at")) {
		t.Fatalf("task: %v", task)
	}
	if pl := task["payload"].(map[string]any); pl["k"] != "v" || pl["n"] != float64(2) {
		t.Fatalf("payload: %v", pl)
	}
	if len(claim) != 4 || nodetest.Num(claim, "generation") != 1 || nodetest.Str(claim, "session_id") != d.Session ||
		!isWireTime(nodetest.Str(claim, "lease_expires_at")) || !isWireTime(nodetest.Str(claim, "authorization_expires_at")) {
		t.Fatalf("claim: %v", claim)
	}
	if len(m) != 7 || nodetest.Str(m, "state") != "CLAIMED" || nodetest.Num(m, "version") != 2 || nodetest.Num(m, "claim_generation") != 1 ||
		!isWireTime(nodetest.Str(m, "server_time")) || nodetest.Str(m, "lease_expires_at") != nodetest.Str(claim, "lease_expires_at") {
		t.Fatalf("claim answer: %s", r.Body)
	}
}
