package api_test

import (
	"net/http"
	"testing"
	"time"

	"taskledger/node/nodetest"
)

// Same key and same request → the recorded status and body with
// Idempotent-Replayed: true, and nothing appended: claim-next, release,
// start, heartbeat. A device replay answers values as of the original
// command even after the task moved on.
func TestContractIdemReplayDevice(t *testing.T) {
	n := nodetest.Start(t)
	d := n.ReadyDevice(t)
	a := n.CreateTask(nil)
	b := n.CreateTask(nil)

	// claim-next
	ck, tok := nodetest.NewKey(), nodetest.NewClaimToken()
	first := d.ClaimWith(ck, tok)
	nodetest.Must(t, first, http.StatusOK)
	if nodetest.ClaimedTask(first) != a {
		t.Fatalf("claimed %s, want the oldest %s", nodetest.ClaimedTask(first), a)
	}
	h := n.Head()
	again := d.ClaimWith(ck, tok)
	nodetest.MustReplay(t, first, again)
	n.MustUnchanged(t, h)

	// release
	rk := nodetest.NewKey()
	rel := d.Call(a, "release", tok, map[string]any{"claim_generation": 1, "expected_version": 2}, rk)
	nodetest.Must(t, rel, http.StatusOK)
	h = n.Head()
	nodetest.MustReplay(t, rel, d.Call(a, "release", tok, map[string]any{"claim_generation": 1, "expected_version": 2}, rk))
	n.MustUnchanged(t, h)

	// The claim is no longer current: its replay is refused.
	n.MustRefuse(t, h, d.ClaimWith(ck, tok), http.StatusConflict, "claim_replay_expired")

	// start and heartbeat on the next claim (the released task a is
	// older than b, so a comes back with generation 2).
	ck2, tok2 := nodetest.NewKey(), nodetest.NewClaimToken()
	c2 := d.ClaimWith(ck2, tok2)
	nodetest.Must(t, c2, http.StatusOK)
	if nodetest.ClaimedTask(c2) != a || nodetest.Num(c2.JSON(), "claim_generation") != 2 {
		t.Fatalf("want %s generation 2, got %s", a, c2.Body)
	}
	sk := nodetest.NewKey()
	start := d.Call(a, "start", tok2, map[string]any{"claim_generation": 2, "expected_version": 4}, sk)
	nodetest.Must(t, start, http.StatusOK)
	ex := nodetest.Str(start.JSON(), "execution_id")
	h = n.Head()
	nodetest.MustReplay(t, start, d.Call(a, "start", tok2, map[string]any{"claim_generation": 2, "expected_version": 4}, sk))
	n.MustUnchanged(t, h)

	hk := nodetest.NewKey()
	hb := map[string]any{"claim_generation": 2, "execution_id": ex, "step": "one", "client_time": "2026-01-01T00:00:00Z"}
	beat := d.Call(a, "heartbeat", tok2, hb, hk)
	nodetest.Must(t, beat, http.StatusOK)
	if nodetest.Str(beat.JSON(), "step") != "one" {
		t.Fatalf("heartbeat answer lacks step: %s", beat.Body)
	}
	h = n.Head()
	nodetest.MustReplay(t, beat, d.Call(a, "heartbeat", tok2, map[string]any{"claim_generation": 2, "execution_id": ex, "step": "one",
		"client_time": "2026-01-01T00:00:00Z"}, hk))

	n.MustUnchanged(t, h)

	// Time moves and a later heartbeat extends the lease: replays still
	// answer the original values.
	n.Advance(10 * time.Second)
	later := d.Call(a, "heartbeat", tok2, map[string]any{"claim_generation": 2, "execution_id": ex, "step": "two"}, "")
	nodetest.Must(t, later, http.StatusOK)
	if nodetest.Str(later.JSON(), "lease_expires_at") == nodetest.Str(beat.JSON(), "lease_expires_at") {
		t.Fatalf("later heartbeat did not extend the lease")
	}
	h = n.Head()
	nodetest.MustReplay(t, beat, d.Call(a, "heartbeat", tok2, map[string]any{"claim_generation": 2, "execution_id": ex, "step": "one",
		"client_time": "2026-01-01T00:00:00Z"}, hk))

	nodetest.MustReplay(t, start, d.Call(a, "start", tok2, map[string]any{"claim_generation": 2, "expected_version": 4}, sk))
	nodetest.MustReplay(t, c2, d.ClaimWith(ck2, tok2))
	n.MustUnchanged(t, h)
	_ = b
}

// Same key, another request → 409 idempotency_conflict, nothing
// appended; the scope is (actor, operation, key), so the same key on
// another operation or by another actor is a new request.
func TestContractIdemConflict(t *testing.T) {
	n := nodetest.Start(t)
	d := n.ReadyDevice(t)
	e := n.ReadyDevice(t)
	a := n.CreateTask(nil)
	n.CreateTask(nil)
	ck, tok := nodetest.NewKey(), nodetest.NewClaimToken()
	nodetest.Must(t, d.ClaimWith(ck, tok), http.StatusOK)
	h := n.Head()
	// Another token, another session.
	n.MustRefuse(t, h, d.ClaimWith(ck, nodetest.NewClaimToken()), http.StatusConflict, "idempotency_conflict")
	sess := d.Session
	d.Session = nodetest.NewID()
	n.MustRefuse(t, h, d.ClaimWith(ck, tok), http.StatusConflict, "idempotency_conflict")
	d.Session = sess

	sk := nodetest.NewKey()
	nodetest.Must(t, d.Call(a, "start", tok, map[string]any{"claim_generation": 1, "expected_version": 2}, sk), http.StatusOK)
	h = n.Head()
	// Another body, another token, another task, with the start key.
	n.MustRefuse(t, h, d.Call(a, "start", tok, map[string]any{"claim_generation": 1, "expected_version": 3}, sk), http.StatusConflict, "idempotency_conflict")
	n.MustRefuse(t, h, d.Call(a, "start", nodetest.NewClaimToken(), map[string]any{"claim_generation": 1, "expected_version": 2}, sk), http.StatusConflict, "idempotency_conflict")
	n.MustRefuse(t, h, d.Call(nodetest.NewID(), "start", tok, map[string]any{"claim_generation": 1, "expected_version": 2}, sk), http.StatusConflict, "idempotency_conflict")

	// Same key on another operation of the same device is another request.
	r := d.Call(a, "release", tok, map[string]any{"claim_generation": 1, "expected_version": 3}, sk)
	n.MustRefuse(t, h, r, http.StatusConflict, "invalid_state")
	// Same key by another device is another request.
	e.Session = d.Session
	r = e.ClaimWith(ck, tok)
	nodetest.Must(t, r, http.StatusOK)
	if r.Header.Get("Idempotent-Replayed") != "" {
		t.Fatalf("another device's key was replayed")
	}

	// Admin: same key, other payload / other route parameters.
	key := nodetest.NewKey()
	cr := n.Do("POST", nodetest.AdminPath+"/tasks", n.AdminToken, map[string]any{"payload": map[string]any{"x": 1}}, map[string]string{"Idempotency-Key": key})
	nodetest.Must(t, cr, http.StatusCreated)
	h = n.Head()
	r = n.Do("POST", nodetest.AdminPath+"/tasks", n.AdminToken, map[string]any{"payload": map[string]any{"x": 2}}, map[string]string{"Idempotency-Key": key})
	n.MustRefuse(t, h, r, http.StatusConflict, "idempotency_conflict")
	r = n.Do("POST", nodetest.AdminPath+"/tasks", n.AdminToken, map[string]any{"payload": map[string]any{"x": 1}, "authorize": map[string]any{"ttl_seconds": 3600}},
		map[string]string{"Idempotency-Key": key})
	n.MustRefuse(t, h, r, http.StatusConflict, "idempotency_conflict")
	id := nodetest.Str(cr.JSON(), "id")
	other := n.CreateTask(nil)
	ckey := nodetest.NewKey()
	nodetest.Must(t, n.Do("POST", nodetest.AdminPath+"/tasks/"+id+"/cancel", n.AdminToken, map[string]any{"reason": "r"}, map[string]string{"Idempotency-Key": ckey}), http.StatusOK)
	h = n.Head()
	r = n.Do("POST", nodetest.AdminPath+"/tasks/"+other+"/cancel", n.AdminToken, map[string]any{"reason": "r"}, map[string]string{"Idempotency-Key": ckey})
	n.MustRefuse(t, h, r, http.StatusConflict, "idempotency_conflict")
	r = n.Do("POST", nodetest.AdminPath+"/tasks/"+id+"/cancel", n.AdminToken, map[string]any{"reason": "other"}, map[string]string{"Idempotency-Key": ckey})
	n.MustRefuse(t, h, r, http.StatusConflict, "idempotency_conflict")
}

// Admin replays: same key and body → the recorded status with the current
// document and Idempotent-Replayed: true, nothing appended; a device
// registration replays without its token.
func TestContractIdemReplayAdmin(t *testing.T) {
	n := nodetest.Start(t)
	key := nodetest.NewKey()
	body := map[string]any{"payload": map[string]any{"x": 1}, "authorize": map[string]any{"ttl_seconds": 3600}}
	first := n.Do("POST", nodetest.AdminPath+"/tasks", n.AdminToken, body, map[string]string{"Idempotency-Key": key})
	nodetest.Must(t, first, http.StatusCreated)
	h := n.Head()
	nodetest.MustReplay(t, first, n.Do("POST", nodetest.AdminPath+"/tasks", n.AdminToken, body, map[string]string{"Idempotency-Key": key}))
	n.MustUnchanged(t, h)
	// Key order and whitespace do not make another request.
	raw := []byte("{ \"authorize\": {\"ttl_seconds\": 3600},\n \"payload\": {\"x\": 1} }")
	nodetest.MustReplay(t, first, n.Raw(t, "POST", nodetest.AdminPath+"/tasks", n.AdminToken, raw, false,
		map[string]string{"Content-Type": "application/json", "Idempotency-Key": key}))

	n.MustUnchanged(t, h)

	// The replay shows the current document: after a cancel, CANCELED.
	id := nodetest.Str(first.JSON(), "id")
	nodetest.Must(t, n.Cancel(id), http.StatusOK)
	h = n.Head()
	r := n.Do("POST", nodetest.AdminPath+"/tasks", n.AdminToken, body, map[string]string{"Idempotency-Key": key})
	nodetest.Must(t, r, http.StatusCreated)
	if r.Header.Get("Idempotent-Replayed") != "true" || nodetest.Str(r.JSON(), "state") != "CANCELED" || nodetest.Str(r.JSON(), "id") != id {
		t.Fatalf("replay after cancel: %s", r.Body)
	}
	n.MustUnchanged(t, h)

	// Device registration: the token is shown once.
	rk := nodetest.NewKey()
	reg := map[string]any{"owner_id": nodetest.NewID(), "name": "phone"}
	d1 := n.Do("POST", nodetest.AdminPath+"/devices", n.AdminToken, reg, map[string]string{"Idempotency-Key": rk})
	nodetest.Must(t, d1, http.StatusCreated)
	tok := nodetest.Str(d1.JSON(), "token")
	if len(tok) != 6+43 || tok[:6] != "tldev_" {
		t.Fatalf("device token %q", tok)
	}
	h = n.Head()
	d2 := n.Do("POST", nodetest.AdminPath+"/devices", n.AdminToken, reg, map[string]string{"Idempotency-Key": rk})
	nodetest.Must(t, d2, http.StatusCreated)
	n.MustUnchanged(t, h)
	m1, m2 := d1.JSON(), d2.JSON()
	if d2.Header.Get("Idempotent-Replayed") != "true" {
		t.Fatalf("registration replay lacks Idempotent-Replayed")
	}
	if _, has := m2["token"]; has {
		t.Fatalf("registration replay shows the token: %s", d2.Body)
	}
	delete(m1, "token")
	if nodetest.Str(m1, "device_id") != nodetest.Str(m2, "device_id") || len(m1) != len(m2) {
		t.Fatalf("replay %s differs from %s", d2.Body, d1.Body)
	}
	// The token shown once works.
	dev := &nodetest.Device{N: n, ID: nodetest.Str(m1, "device_id"), Token: tok, Session: nodetest.NewID()}
	nodetest.Must(t, dev.Ready(), http.StatusOK)
}

// A recorded 204 stays 204 (with Retry-After: 2) after tasks appear;
// another key then claims.
func TestContractIdemRecorded204(t *testing.T) {
	n := nodetest.Start(t)
	d := n.ReadyDevice(t)
	key, tok := nodetest.NewKey(), nodetest.NewClaimToken()
	first := d.ClaimWith(key, tok)
	if first.Status != http.StatusNoContent || first.Header.Get("Retry-After") != "2" || len(first.Body) != 0 {
		t.Fatalf("want 204 with Retry-After: 2, got %d %q %s", first.Status, first.Header.Get("Retry-After"), first.Body)
	}
	id := n.CreateTask(nil)
	h := n.Head()
	again := d.ClaimWith(key, tok)
	if again.Status != http.StatusNoContent || again.Header.Get("Retry-After") != "2" || again.Header.Get("Idempotent-Replayed") != "true" {
		t.Fatalf("replay: want 204 replayed with Retry-After: 2, got %d %v %s", again.Status, again.Header, again.Body)
	}
	n.MustUnchanged(t, h)
	// Same key, another request: the 204 record conflicts like any other.
	n.MustRefuse(t, h, d.ClaimWith(key, nodetest.NewClaimToken()), http.StatusConflict, "idempotency_conflict")
	// The recorded 204 survives a restart (soft record) and time.
	n = n.Restart()
	n.Advance(30 * time.Minute) // the task's authorization (1 h) is still valid
	d.N = n
	nodetest.Must(t, d.Ready(), http.StatusOK)
	h = n.Head()
	again = d.ClaimWith(key, tok)
	if again.Status != http.StatusNoContent || again.Header.Get("Idempotent-Replayed") != "true" {
		t.Fatalf("replay after restart: %d %s", again.Status, again.Body)
	}
	n.MustUnchanged(t, h)
	r, _ := d.Claim()
	nodetest.Must(t, r, http.StatusOK)
	if nodetest.ClaimedTask(r) != id {
		t.Fatalf("claimed %s, want %s", nodetest.ClaimedTask(r), id)
	}
}

// A claim replayed when its generation is no longer the task's open
// claim → 409 claim_replay_expired: after release, after an operator
// cancel, after it expired and another device re-claimed. Replays of
// release always answer the recorded outcome.
func TestContractIdemClaimReplayExpired(t *testing.T) {
	n := nodetest.Start(t)
	d := n.ReadyDevice(t)
	e := n.ReadyDevice(t)

	// After an operator cancel of the CLAIMED task.
	a := n.CreateTask(nil)
	ka, ta := nodetest.NewKey(), nodetest.NewClaimToken()
	nodetest.Must(t, d.ClaimWith(ka, ta), http.StatusOK)
	nodetest.Must(t, n.Cancel(a), http.StatusOK)
	h := n.Head()
	n.MustRefuse(t, h, d.ClaimWith(ka, ta), http.StatusConflict, "claim_replay_expired")

	// After expiry and a re-claim by another device.
	b := n.CreateTask(nil)
	kb, tb := nodetest.NewKey(), nodetest.NewClaimToken()
	nodetest.Must(t, d.ClaimWith(kb, tb), http.StatusOK)
	rk := nodetest.NewKey()
	n.Advance(10 * time.Minute)
	nodetest.Must(t, e.Ready(), http.StatusOK)
	r, _ := e.Claim()
	nodetest.Must(t, r, http.StatusOK)
	if nodetest.ClaimedTask(r) != b || nodetest.Num(r.JSON(), "claim_generation") != 2 {
		t.Fatalf("want %s generation 2, got %s", b, r.Body)
	}
	h = n.Head()
	n.MustRefuse(t, h, d.ClaimWith(kb, tb), http.StatusConflict, "claim_replay_expired")
	// The former holder is refused; the refusal is not recorded (rk is
	// used again below for another request).
	n.MustRefuse(t, h, d.Call(b, "release", tb, map[string]any{"claim_generation": 1, "expected_version": 2}, rk), http.StatusNotFound, "claim_not_found")

	// A release replays its recorded outcome even after the task moved on.
	c := n.CreateTask(nil)
	nodetest.Must(t, d.Ready(), http.StatusOK)
	kc, tc := nodetest.NewKey(), nodetest.NewClaimToken()
	nodetest.Must(t, d.ClaimWith(kc, tc), http.StatusOK)
	rel := d.Call(c, "release", tc, map[string]any{"claim_generation": 1, "expected_version": 2}, rk)
	nodetest.Must(t, rel, http.StatusOK)
	r, _ = d.Claim()
	nodetest.Must(t, r, http.StatusOK)
	h = n.Head()
	nodetest.MustReplay(t, rel, d.Call(c, "release", tc, map[string]any{"claim_generation": 1, "expected_version": 2}, rk))
	n.MustRefuse(t, h, d.ClaimWith(kc, tc), http.StatusConflict, "claim_replay_expired")
	n.MustUnchanged(t, h)
}

// A start or heartbeat replayed after its execution ended or its lease
// expired → 409 claim_replay_expired; cancel-ack replays its outcome.
func TestContractIdemExecutionReplayExpired(t *testing.T) {
	n := nodetest.Start(t)
	d := n.ReadyDevice(t)
	n.CreateTask(nil)
	n.CreateTask(nil)
	a, tok, _ := d.MustClaim(t)
	sk := nodetest.NewKey()
	st := d.Call(a, "start", tok, map[string]any{"claim_generation": 1, "expected_version": 2}, sk)
	nodetest.Must(t, st, http.StatusOK)
	ex := nodetest.Str(st.JSON(), "execution_id")
	hk := nodetest.NewKey()
	nodetest.Must(t, d.Call(a, "heartbeat", tok, map[string]any{"claim_generation": 1, "execution_id": ex, "step": "s"}, hk), http.StatusOK)
	nodetest.Must(t, n.Cancel(a), http.StatusOK)
	ak := nodetest.NewKey()
	ack := d.Call(a, "cancel-ack", tok, map[string]any{"claim_generation": 1, "execution_id": ex, "expected_version": 3}, ak)
	nodetest.Must(t, ack, http.StatusOK)
	h := n.Head()
	n.MustRefuse(t, h, d.Call(a, "start", tok, map[string]any{"claim_generation": 1, "expected_version": 2}, sk), http.StatusConflict, "claim_replay_expired")
	n.MustRefuse(t, h, d.Call(a, "heartbeat", tok, map[string]any{"claim_generation": 1, "execution_id": ex, "step": "s"}, hk), http.StatusConflict, "claim_replay_expired")
	nodetest.MustReplay(t, ack, d.Call(a, "cancel-ack", tok, map[string]any{"claim_generation": 1, "execution_id": ex, "expected_version": 3}, ak))
	n.MustUnchanged(t, h)

	// Running lease expired: start and heartbeat replays are refused.
	b, tb, _ := d.MustClaim(t)
	sk = nodetest.NewKey()
	st = d.Call(b, "start", tb, map[string]any{"claim_generation": 1, "expected_version": 2}, sk)
	nodetest.Must(t, st, http.StatusOK)
	ex = nodetest.Str(st.JSON(), "execution_id")
	hk = nodetest.NewKey()
	nodetest.Must(t, d.Call(b, "heartbeat", tb, map[string]any{"claim_generation": 1, "execution_id": ex, "step": "s"}, hk), http.StatusOK)
	n.Advance(90 * time.Second)
	h = n.Head()
	n.MustRefuse(t, h, d.Call(b, "start", tb, map[string]any{"claim_generation": 1, "expected_version": 2}, sk), http.StatusConflict, "claim_replay_expired")
	n.MustRefuse(t, h, d.Call(b, "heartbeat", tb, map[string]any{"claim_generation": 1, "execution_id": ex, "step": "s"}, hk), http.StatusConflict, "claim_replay_expired")
}

// device_not_ready is not recorded: the same key claims once the device
// is ready. A rejected call (version mismatch) is not recorded either.
func TestContractIdemNotReadyNotRecorded(t *testing.T) {
	n := nodetest.Start(t)
	d := n.RegisterDevice()
	n.CreateTask(nil)
	key, tok := nodetest.NewKey(), nodetest.NewClaimToken()
	h := n.Head()
	n.MustRefuse(t, h, d.ClaimWith(key, tok), http.StatusConflict, "device_not_ready")
	nodetest.Must(t, d.Ready(), http.StatusOK)
	r := d.ClaimWith(key, tok)
	nodetest.Must(t, r, http.StatusOK)
	if r.Header.Get("Idempotent-Replayed") != "" {
		t.Fatalf("not-ready outcome was replayed")
	}
	id := nodetest.ClaimedTask(r)
	sk := nodetest.NewKey()
	h = n.Head()
	n.MustRefuse(t, h, d.Call(id, "start", tok, map[string]any{"claim_generation": 1, "expected_version": 9}, sk), http.StatusConflict, "version_mismatch")
	r = d.Call(id, "start", tok, map[string]any{"claim_generation": 1, "expected_version": 2}, sk)
	nodetest.Must(t, r, http.StatusOK)
	if r.Header.Get("Idempotent-Replayed") != "" {
		t.Fatalf("a refused start was recorded")
	}
}

// Replays are answered from the log: after a restart the same keys give
// byte-identical bodies and append nothing. Presence is soft state: a
// restarted server waits for the next heartbeat before a device may claim.
func TestContractIdemReplayAfterRestart(t *testing.T) {
	n := nodetest.Start(t)
	d := n.ReadyDevice(t)
	a := n.CreateTask(nil)
	n.CreateTask(nil)
	ck, tok := nodetest.NewKey(), nodetest.NewClaimToken()
	claim := d.ClaimWith(ck, tok)
	nodetest.Must(t, claim, http.StatusOK)
	sk := nodetest.NewKey()
	start := d.Call(a, "start", tok, map[string]any{"claim_generation": 1, "expected_version": 2}, sk)
	nodetest.Must(t, start, http.StatusOK)
	ex := nodetest.Str(start.JSON(), "execution_id")
	hk := nodetest.NewKey()
	hb := func() *nodetest.Resp {
		return d.Call(a, "heartbeat", tok, map[string]any{"claim_generation": 1, "execution_id": ex, "step": "s",
			"client_time": "2026-01-01T00:00:00.5Z"}, hk)
	}
	beat := hb()
	nodetest.Must(t, beat, http.StatusOK)
	tk := nodetest.NewKey()
	create := n.Do("POST", nodetest.AdminPath+"/tasks", n.AdminToken, map[string]any{"payload": map[string]any{"z": 1}}, map[string]string{"Idempotency-Key": tk})
	nodetest.Must(t, create, http.StatusCreated)

	n = n.Restart()
	d.N = n
	h := n.Head()
	nodetest.MustReplay(t, claim, d.ClaimWith(ck, tok))
	nodetest.MustReplay(t, start, d.Call(a, "start", tok, map[string]any{"claim_generation": 1, "expected_version": 2}, sk))
	nodetest.MustReplay(t, beat, hb())
	nodetest.MustReplay(t, create, n.Do("POST", nodetest.AdminPath+"/tasks", n.AdminToken, map[string]any{"payload": map[string]any{"z": 1}}, map[string]string{"Idempotency-Key": tk}))
	n.MustUnchanged(t, h)

	// Presence did not survive as readiness.
	e := n.RegisterDevice()
	nodetest.Must(t, e.Ready(), http.StatusOK)
	n = n.Restart()
	e.N = n
	h = n.Head()
	n.MustRefuse(t, h, e.ClaimWith(nodetest.NewKey(), nodetest.NewClaimToken()), http.StatusConflict, "device_not_ready")
	nodetest.Must(t, e.Ready(), http.StatusOK)
	r, _ := e.Claim()
	nodetest.Must(t, r, http.StatusOK)
}
