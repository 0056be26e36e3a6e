package api_test

// Authorization snapshots: amend, authorize (TTL bounds),
// authorization/revoke, expiry, the cap of the claim lease, and the start
// that consumes the authorization.

import (
	"net/http"
	"testing"
	"time"

	"taskledger/commands"
	"taskledger/node/nodetest"
)

func TestAmendMakesTaskIneligibleUntilReauthorized(t *testing.T) {
	n := nodetest.Start(t)
	d := n.ReadyDevice(t)
	task := n.CreateTaskFor(t, map[string]any{"n": 1}, time.Hour)
	id := nodetest.Str(task, "id")
	firstAuth := nodetest.Str(nodetest.Obj(task, "authorization"), "id")

	head := n.Head()
	nodetest.Must(t, n.Admin("POST", "/tasks/"+id+"/amend", map[string]any{"expected_revision": 2, "payload": map[string]any{"n": 2}}),
		409, "revision_mismatch")
	if n.Head() != head {
		t.Fatal("a refused amend appended an event")
	}

	r := n.Admin("POST", "/tasks/"+id+"/amend", map[string]any{"expected_revision": 1, "payload": map[string]any{"n": 2}})
	nodetest.Must(t, r, 200)
	doc := r.JSON()
	if nodetest.Num(doc, "revision") != 2 || nodetest.Num(doc, "version") != 1 || nodetest.Str(doc, "state") != "PENDING" {
		t.Fatalf("after amend: revision %v version %v state %v (want 2, 1, PENDING)", doc["revision"], doc["version"], doc["state"])
	}
	if p := nodetest.Obj(doc, "payload"); p["n"] != float64(2) {
		t.Fatalf("payload not amended: %v", doc["payload"])
	}
	auth := nodetest.Obj(doc, "authorization")
	if auth["status"] == "ACTIVE" || nodetest.Num(auth, "revision") != 1 {
		t.Fatalf("the old authorization still looks usable: %v", auth)
	}

	// Ineligible until re-authorized.
	r, _ = d.Claim()
	nodetest.Must(t, r, 204)
	nodetest.Must(t, n.Authorize(id, 1, time.Hour), 409, "revision_mismatch")
	r = n.Authorize(id, 2, time.Hour)
	nodetest.Must(t, r, 200)
	auth = nodetest.Obj(r.JSON(), "authorization")
	if auth["status"] != "ACTIVE" || nodetest.Num(auth, "revision") != 2 || auth["id"] == firstAuth {
		t.Fatalf("re-authorization: %v", auth)
	}
	if v := nodetest.Num(r.JSON(), "version"); v != 1 {
		t.Fatalf("authorizing a PENDING task changed its version to %d", v)
	}
	got, _, claim1 := d.MustClaim(t)
	m := claim1.JSON()
	if got != id || nodetest.Num(nodetest.Obj(m, "task"), "revision") != 2 {
		t.Fatalf("claimed %s revision %v, want %s revision 2", got, nodetest.Obj(m, "task")["revision"], id)
	}
	if p := nodetest.Obj(nodetest.Obj(m, "task"), "payload"); p["n"] != float64(2) {
		t.Fatalf("claimed payload %v, want the amended one", p)
	}
}

func TestAmendClosesOnlyAnExpiredClaim(t *testing.T) {
	n := nodetest.Start(t)
	d := n.ReadyDevice(t)
	id := n.CreateTask(map[string]any{"n": 1})
	_, tok, claim2 := d.MustClaim(t)
	m := claim2.JSON()
	lease := nodetest.Millis(t, m["lease_expires_at"])

	// While the claim lease is valid the operator cannot touch the task.
	head := n.Head()
	nodetest.Must(t, n.Admin("POST", "/tasks/"+id+"/amend", map[string]any{"expected_revision": 1, "payload": map[string]any{"n": 2}}),
		409, "invalid_state")
	nodetest.Must(t, n.Authorize(id, 1, time.Hour), 409, "invalid_state")
	nodetest.Must(t, n.Admin("POST", "/tasks/"+id+"/authorization/revoke", map[string]any{"reason": "x"}), 409, "invalid_state")
	if n.Head() != head {
		t.Fatal("refused operator commands appended events")
	}

	// Exactly at the claim's expiry the claim is stale: amend closes it.
	n.Advance(time.Duration(lease-n.Engine.Now()) * time.Millisecond)
	r := n.Admin("POST", "/tasks/"+id+"/amend", map[string]any{"expected_revision": 1, "payload": map[string]any{"n": 2}})
	nodetest.Must(t, r, 200)
	doc := r.JSON()
	if doc["state"] != "PENDING" || nodetest.Num(doc, "version") != 3 || nodetest.Num(doc, "revision") != 2 || doc["claim"] != nil {
		t.Fatalf("after amend of a stale claim: %s", r.Body)
	}
	evs := n.Events(t, id)
	last := evs[len(evs)-1]
	closed := nodetest.Obj(nodetest.Obj(last, "body"), "closed_claim")
	if last["type"] != "task.amended" || closed["device_id"] != d.ID || closed["claim_generation"] != float64(1) {
		t.Fatalf("the amend event does not name the closed claim: %v", last)
	}
	// The device no longer holds the task.
	nodetest.Must(t, d.Start(id, tok, 1, 2), 404, "claim_not_found")
	// And the task is ineligible until re-authorized.
	nodetest.Must(t, d.Ready(), 200)
	r, _ = d.Claim()
	nodetest.Must(t, r, 204)
	nodetest.Must(t, n.Authorize(id, 2, time.Hour), 200)
	_, _, claim3 := d.MustClaim(t)
	m = claim3.JSON()
	if nodetest.Num(m, "claim_generation") != 2 || nodetest.Num(m, "version") != 4 {
		t.Fatalf("re-claim: generation %v version %v, want 2 and 4", m["claim_generation"], m["version"])
	}
}

func TestAuthorizeAndRevokeCloseAnExpiredClaim(t *testing.T) {
	n := nodetest.Start(t)
	d := n.ReadyDevice(t)
	a := n.CreateTask(map[string]any{"n": "a"})
	d.MustClaim(t)
	n.Advance(10 * time.Minute)

	// authorize on a stale claim: closes it, version +1, new authorization.
	r := n.Authorize(a, 1, time.Hour)
	nodetest.Must(t, r, 200)
	doc := r.JSON()
	if doc["state"] != "PENDING" || nodetest.Num(doc, "version") != 3 || doc["claim"] != nil ||
		nodetest.Obj(doc, "authorization")["status"] != "ACTIVE" {
		t.Fatalf("authorize of a stale claim: %s", r.Body)
	}

	// authorization/revoke on a stale claim: closes it too.
	nodetest.Must(t, d.Ready(), 200)
	got, _, _ := d.MustClaim(t)
	if got != a {
		t.Fatalf("claimed %s, want %s", got, a)
	}
	n.Advance(10 * time.Minute)
	r = n.Admin("POST", "/tasks/"+a+"/authorization/revoke", map[string]any{"reason": "stop"})
	nodetest.Must(t, r, 200)
	doc = r.JSON()
	if doc["state"] != "PENDING" || nodetest.Num(doc, "version") != 5 || doc["claim"] != nil ||
		nodetest.Obj(doc, "authorization")["status"] != "REVOKED" {
		t.Fatalf("revoke of a stale claim: %s", r.Body)
	}
}

func TestAuthorizeTTLBounds(t *testing.T) {
	n := nodetest.Start(t)
	body := func(ttl int64) map[string]any {
		return map[string]any{"payload": map[string]any{"n": 1}, "authorize": map[string]any{"ttl_seconds": ttl}}
	}
	head := n.Head()
	nodetest.Must(t, n.Admin("POST", "/tasks", body(15*60-1)), 422, "invalid_ttl")
	nodetest.Must(t, n.Admin("POST", "/tasks", body(720*3600+1)), 422, "invalid_ttl")
	if n.Head() != head {
		t.Fatal("a refused create appended an event")
	}

	id := nodetest.Str(n.CreateTaskFor(t, map[string]any{"n": 1}, 0), "id")
	if n.Task(id)["authorization"] != nil {
		t.Fatal("a task created without authorize has an authorization")
	}
	head = n.Head()
	nodetest.Must(t, n.Authorize(id, 1, 15*time.Minute-time.Second), 422, "invalid_ttl")
	nodetest.Must(t, n.Authorize(id, 1, 720*time.Hour+time.Second), 422, "invalid_ttl")
	// Validation comes before any state check: a wrong revision or an
	// unknown task with a bad TTL is still 422.
	nodetest.Must(t, n.Authorize(id, 9, time.Minute), 422, "invalid_ttl")
	nodetest.Must(t, n.Authorize(nodetest.NewKey(), 1, time.Minute), 422, "invalid_ttl")
	if n.Head() != head {
		t.Fatal("a refused authorize appended an event")
	}
	nodetest.Must(t, n.Authorize(nodetest.NewKey(), 1, time.Hour), 404, "task_not_found")

	// The bounds are inclusive.
	for _, ttl := range []time.Duration{15 * time.Minute, 720 * time.Hour} {
		now := n.Engine.Now()
		r := n.Authorize(id, 1, ttl)
		nodetest.Must(t, r, 200)
		if got := nodetest.Millis(t, nodetest.Obj(r.JSON(), "authorization")["expires_at"]); got != now+ttl.Milliseconds() {
			t.Fatalf("ttl %s: expires_at %s, want %s", ttl, nodetest.FormatMillis(got), nodetest.FormatMillis(now+ttl.Milliseconds()))
		}
	}

	// The configured bounds are the ones applied.
	n2 := nodetest.Start(t, nodetest.WithConfig(func(c *commands.Config) { c.AuthTTLMin, c.AuthTTLMax = time.Hour, 2*time.Hour }))
	id2 := nodetest.Str(n2.CreateTaskFor(t, map[string]any{"n": 1}, 0), "id")
	nodetest.Must(t, n2.Authorize(id2, 1, time.Hour-time.Second), 422, "invalid_ttl")
	nodetest.Must(t, n2.Authorize(id2, 1, 2*time.Hour+time.Second), 422, "invalid_ttl")
	nodetest.Must(t, n2.Authorize(id2, 1, time.Hour), 200)
	nodetest.Must(t, n2.Authorize(id2, 1, 2*time.Hour), 200)
}

func TestRevokeAuthorization(t *testing.T) {
	n := nodetest.Start(t)
	d := n.ReadyDevice(t)
	id := n.CreateTask(nil)
	r := n.Admin("POST", "/tasks/"+id+"/authorization/revoke", map[string]any{"reason": "wrong target"})
	nodetest.Must(t, r, 200)
	if nodetest.Obj(r.JSON(), "authorization")["status"] != "REVOKED" || nodetest.Num(r.JSON(), "version") != 1 {
		t.Fatalf("after revoke: %s", r.Body)
	}
	r, _ = d.Claim()
	nodetest.Must(t, r, 204)
	nodetest.Must(t, n.Admin("POST", "/tasks/"+id+"/authorization/revoke", map[string]any{"reason": "again"}), 409, "invalid_state")
	noAuth := nodetest.Str(n.CreateTaskFor(t, map[string]any{"n": 2}, 0), "id")
	nodetest.Must(t, n.Admin("POST", "/tasks/"+noAuth+"/authorization/revoke", map[string]any{"reason": "none"}), 409, "invalid_state")
	nodetest.Must(t, n.Authorize(id, 1, time.Hour), 200)
	got, _, _ := d.MustClaim(t)
	if got != id {
		t.Fatalf("claimed %s, want the re-authorized %s", got, id)
	}
}

// A claim lease never outlives its authorization: lease_expires_at =
// min(now + claim lease, authorization.expires_at), and a start at the
// capped expiry is refused lease_expired.
func TestClaimLeaseCappedAtAuthorizationExpiry(t *testing.T) {
	n := nodetest.Start(t)
	d := n.ReadyDevice(t)
	task := n.CreateTaskFor(t, map[string]any{"n": 1}, 15*time.Minute)
	id := nodetest.Str(task, "id")
	authExp := nodetest.Millis(t, nodetest.Obj(task, "authorization")["expires_at"])

	n.Advance(10 * time.Minute) // now + claim lease (10m) would pass the authorization (5m left)
	nodetest.Must(t, d.Ready(), 200)
	_, tok, capped := d.MustClaim(t)
	m := capped.JSON()
	claim := nodetest.Obj(m, "claim")
	for name, v := range map[string]any{"lease_expires_at": m["lease_expires_at"], "claim.lease_expires_at": claim["lease_expires_at"],
		"claim.authorization_expires_at": claim["authorization_expires_at"], "detail claim.lease_expires_at": nodetest.Obj(n.Task(id), "claim")["lease_expires_at"]} {
		if got := nodetest.Millis(t, v); got != authExp {
			t.Errorf("%s = %s, want the authorization's expiry %s", name, nodetest.FormatMillis(got), nodetest.FormatMillis(authExp))
		}
	}

	n.AdvanceTo(t, authExp)
	n.MustRefuse(t, n.Head(), d.Start(id, tok, 1, 2), http.StatusConflict, "lease_expired")

	// With a long authorization the lease is the configured claim lease.
	other := n.RegisterDevice()
	nodetest.Must(t, other.Ready(), 200)
	n.CreateTask(map[string]any{"n": 2})
	now := n.Engine.Now()
	_, _, long := other.MustClaim(t)
	m = long.JSON()
	if got := nodetest.Millis(t, m["lease_expires_at"]); got != now+(10*time.Minute).Milliseconds() {
		t.Fatalf("lease %s, want now + 10m", nodetest.FormatMillis(got))
	}
}

func TestStartConsumesTheAuthorization(t *testing.T) {
	n := nodetest.Start(t)
	d := n.ReadyDevice(t)
	d2 := n.ReadyDevice(t)
	id := n.CreateTask(nil)

	// A claim does not consume it: released, it is claimed again.
	_, tok, _ := d.MustClaim(t)
	nodetest.Must(t, d.Call(id, "release", tok, map[string]any{"claim_generation": 1, "expected_version": 2}, ""), 200)
	got, tok2, _ := d2.MustClaim(t)
	if got != id {
		t.Fatalf("claimed %s after release, want %s", got, id)
	}
	// The first start consumes it.
	s := d2.Start(id, tok2, 2, 4)
	nodetest.Must(t, s, 200)
	exec1 := nodetest.Str(s.JSON(), "execution_id")
	if st := nodetest.Obj(n.Task(id), "authorization")["status"]; st != "CONSUMED" {
		t.Fatalf("authorization after start: %v, want CONSUMED", st)
	}

	// The running lease lapses; the operator requeues. The consumed
	// authorization cannot be claimed again.
	n.Advance(90 * time.Second)
	r := n.Admin("POST", "/tasks/"+id+"/recover", map[string]any{"decision": "requeue", "reason": "device silent", "expected_version": 5})
	nodetest.Must(t, r, 200)
	if r.JSON()["state"] != "PENDING" || nodetest.Obj(r.JSON(), "authorization")["status"] == "ACTIVE" {
		t.Fatalf("after requeue: %s", r.Body)
	}
	nodetest.Must(t, d.Ready(), 200)
	nodetest.Must(t, d2.Ready(), 200)
	r, _ = d.Claim()
	nodetest.Must(t, r, 204)

	// A new authorization makes it claimable: one more execution.
	nodetest.Must(t, n.Authorize(id, 1, time.Hour), 200)
	got, tok3, claim6 := d.MustClaim(t)
	m := claim6.JSON()
	if got != id || nodetest.Num(m, "claim_generation") != 3 {
		t.Fatalf("claimed %s generation %v", got, m["claim_generation"])
	}
	s = d.Start(id, tok3, 3, nodetest.Num(m, "version"))
	nodetest.Must(t, s, 200)
	if nodetest.Str(s.JSON(), "execution_id") == exec1 {
		t.Fatal("the second execution reuses the first execution's id")
	}
}
