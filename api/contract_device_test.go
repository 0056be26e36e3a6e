package api_test

import (
	"bytes"
	"net/http"
	"strings"
	"testing"

	"taskledger/node/nodetest"
)

// badIdemKeys are malformed Idempotency-Key values.
var badIdemKeys = []string{
	"nope",
	"6BA7B810-9DAD-41D1-80B4-00C04FD430C8",   // uppercase v4
	"6ba7b810-9dad-11d1-80b4-00c04fd430c8",   // version 1
	"6ba7b810-9dad-41d1-c0b4-00c04fd430c8",   // wrong variant
	"6ba7b8109dad41d180b400c04fd430c8",       // no dashes
	"{6ba7b810-9dad-41d1-80b4-00c04fd430c8}", // braces
	"urn:uuid:6ba7b810-9dad-41d1-80b4-00c04fd430c8",
	"6ba7b810-9dad-41d1-80b4-00c04fd430c",
	"00000000-0000-0000-0000-000000000000",
}

// Every POST except the presence heartbeat (and the test clock) requires
// a canonical lowercase UUIDv4 Idempotency-Key: missing or malformed → 400
// invalid_idempotency_key, nothing appended.
func TestContractIdempotencyKeyRequired(t *testing.T) {
	n := nodetest.Start(t)
	d := n.ReadyDevice(t)
	n.CreateTask(nil)
	id, tok, _ := d.MustClaim(t)
	u := n.Do("POST", nodetest.AdminPath+"/tasks", n.AdminToken, map[string]any{"payload": map[string]any{"u": 1}}, nil)
	nodetest.Must(t, u, http.StatusCreated)
	uid := nodetest.Str(u.JSON(), "id")
	call := `{"device_id":"` + d.ID + `","claim_generation":1,"expected_version":2}`
	type route struct{ path, token, body string }
	routes := []route{
		{nodetest.ClaimNext, d.Token, `{"device_id":"` + d.ID + `","session_id":"` + d.Session + `"}`},
		{nodetest.DevicePath + "/tasks/" + id + "/start", d.Token, call},
		{nodetest.DevicePath + "/tasks/" + id + "/release", d.Token, call},
		{nodetest.DevicePath + "/tasks/" + id + "/heartbeat", d.Token, `{"device_id":"` + d.ID + `","claim_generation":1,"execution_id":"` + nodetest.NewID() + `","step":"s"}`},
		{nodetest.DevicePath + "/tasks/" + id + "/cancel-ack", d.Token, `{"device_id":"` + d.ID + `","claim_generation":1,"execution_id":"` + nodetest.NewID() + `","expected_version":3}`},
		{nodetest.AdminPath + "/tasks", n.AdminToken, `{"payload":{"a":1}}`},
		{nodetest.AdminPath + "/devices", n.AdminToken, `{"owner_id":"` + nodetest.NewID() + `","name":"x"}`},
		{nodetest.AdminPath + "/tasks/" + uid + "/authorize", n.AdminToken, `{"expected_revision":1,"ttl_seconds":3600}`},
		{nodetest.AdminPath + "/tasks/" + id + "/cancel", n.AdminToken, `{"reason":"x"}`},
	}
	before := n.Head()
	for _, rt := range routes {
		for _, k := range append([]string{""}, badIdemKeys...) {
			h := map[string]string{"Content-Type": "application/json", "X-Claim-Token": tok}
			if k != "" {
				h["Idempotency-Key"] = k
			}
			r := n.Raw(t, "POST", rt.path, rt.token, []byte(rt.body), false, h)
			if r.Status != 400 || r.Code() != "invalid_idempotency_key" {
				t.Errorf("%s with key %q: want 400 invalid_idempotency_key, got %d %s", rt.path, k, r.Status, r.Body)
			}
		}
		// Two keys are not one key.
		req := map[string]string{"Content-Type": "application/json", "X-Claim-Token": tok}
		r := rawMultiHeader(t, n, rt.path, rt.token, rt.body, req, "Idempotency-Key", nodetest.NewKey(), nodetest.NewKey())
		if r.Status != 400 || r.Code() != "invalid_idempotency_key" {
			t.Errorf("%s with two keys: want 400 invalid_idempotency_key, got %d %s", rt.path, r.Status, r.Body)
		}
	}
	n.MustUnchanged(t, before)

	// A key sent to the presence heartbeat or the test clock is ignored,
	// even a malformed one.
	for _, k := range badIdemKeys[:3] {
		r := n.Do("POST", nodetest.Presence, d.Token, map[string]any{"device_id": d.ID, "app_version": "1", "os_version": "1",
			"target_app_version": "1", "checks": map[string]bool{"a": true}}, map[string]string{"Idempotency-Key": k})
		nodetest.Must(t, r, http.StatusOK)
		r = n.Do("POST", nodetest.AdminPath+"/test-clock/advance", n.AdminToken, map[string]any{"seconds": 1}, map[string]string{"Idempotency-Key": k})
		nodetest.Must(t, r, http.StatusOK)
	}
	r := n.Raw(t, "POST", nodetest.AdminPath+"/test-clock/advance", n.AdminToken, []byte(`{"seconds":1}`), false, map[string]string{"Content-Type": "application/json"})
	nodetest.Must(t, r, http.StatusOK)
}

// rawMultiHeader sends a POST whose header name carries several values.
func rawMultiHeader(t *testing.T, n *nodetest.Node, path, token, body string, headers map[string]string, name string, values ...string) *nodetest.Resp {
	t.Helper()
	req, err := http.NewRequest("POST", n.URL+path, bytes.NewReader([]byte(body)))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer "+token)
	for k, v := range headers {
		req.Header.Set(k, v)
	}
	for _, v := range values {
		req.Header.Add(name, v)
	}
	res, err := n.HTTP.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	var buf bytes.Buffer
	_, _ = buf.ReadFrom(res.Body)
	return &nodetest.Resp{Status: res.StatusCode, Header: res.Header, Body: buf.Bytes()}
}

// badClaimTokens are malformed X-Claim-Token values.
var badClaimTokens = []string{
	"x",
	strings.Repeat("A", 42),
	strings.Repeat("A", 44),
	strings.Repeat("A", 42) + "=",
	strings.Repeat("A", 42) + "+",
	strings.Repeat("A", 42) + "/",
	strings.Repeat("A", 42) + ".",
	strings.Repeat("a", 63),
	strings.Repeat("a", 65),
	strings.Repeat("A", 64), // uppercase hex is 64 base64url chars: neither form
	strings.Repeat("A", 41) + "==",
}

// Task-scoped calls need a well-formed X-Claim-Token (43 base64url chars
// or 64 lowercase hex): missing or malformed → 400 invalid_claim_token;
// claim-next refuses a malformed one (and a server-issued-looking one: a
// claim sends only client-issued tokens); claim-next without a token when
// the server has no claim-token secret → 400 claim_token_required.
// Nothing is appended by any of them.
func TestContractClaimTokenHeader(t *testing.T) {
	n := nodetest.Start(t)
	d := n.ReadyDevice(t)
	n.CreateTask(nil)
	before := n.Head()

	// claim-next without a token: the default test node has no secret.
	r := d.ClaimWith(nodetest.NewKey(), "")
	n.MustRefuse(t, before, r, http.StatusBadRequest, "claim_token_required")
	for _, tok := range badClaimTokens { // a 64-hex token is well-formed: decisions.md D8
		r := d.ClaimWith(nodetest.NewKey(), tok)
		n.MustRefuse(t, before, r, http.StatusBadRequest, "invalid_claim_token")
	}
	body := `{"device_id":"` + d.ID + `","session_id":"` + d.Session + `"}`
	r = rawMultiHeader(t, n, nodetest.ClaimNext, d.Token, body, nodetest.JSONHeaders(nil), "X-Claim-Token", nodetest.NewClaimToken(), nodetest.NewClaimToken())
	n.MustRefuse(t, before, r, http.StatusBadRequest, "invalid_claim_token")

	id, tok, _ := d.MustClaim(t)
	before = n.Head()
	call := map[string]any{"claim_generation": 1, "expected_version": 2}
	for _, op := range []string{"start", "release"} {
		r := d.Call(id, op, "", call, "")
		n.MustRefuse(t, before, r, http.StatusBadRequest, "invalid_claim_token")
		for _, bad := range badClaimTokens {
			r := d.Call(id, op, bad, map[string]any{"claim_generation": 1, "expected_version": 2}, "")
			n.MustRefuse(t, before, r, http.StatusBadRequest, "invalid_claim_token")
		}
		r = rawMultiHeader(t, n, nodetest.DevicePath+"/tasks/"+id+"/"+op, d.Token, `{"device_id":"`+d.ID+`","claim_generation":1,"expected_version":2}`,
			nodetest.JSONHeaders(nil), "X-Claim-Token", tok, tok)
		n.MustRefuse(t, before, r, http.StatusBadRequest, "invalid_claim_token")
	}
	for _, op := range []string{"heartbeat", "cancel-ack"} {
		b := map[string]any{"claim_generation": 1, "execution_id": nodetest.NewID(), "step": "s"}
		if op == "cancel-ack" {
			b = map[string]any{"claim_generation": 1, "execution_id": nodetest.NewID(), "expected_version": 3}
		}
		n.MustRefuse(t, before, d.Call(id, op, "", b, ""), http.StatusBadRequest, "invalid_claim_token")
		n.MustRefuse(t, before, d.Call(id, op, "short", b, ""), http.StatusBadRequest, "invalid_claim_token")
	}
	// A well-formed server-issued form is no format error on a task call:
	// it is simply not this claim's token.
	r = d.Call(id, "start", strings.Repeat("a", 64), map[string]any{"claim_generation": 1, "expected_version": 2}, "")
	n.MustRefuse(t, before, r, http.StatusForbidden, "claim_token_mismatch")
	nodetest.Must(t, d.Call(id, "start", tok, map[string]any{"claim_generation": 1, "expected_version": 2}, ""), http.StatusOK)
}

// A device_id in a body that is not the authenticated device's → 403
// device_mismatch on every device route, nothing appended.
func TestContractDeviceMismatch(t *testing.T) {
	n := nodetest.Start(t)
	d := n.ReadyDevice(t)
	e := n.ReadyDevice(t)
	n.CreateTask(nil)
	id, tok, _ := d.MustClaim(t)
	before := n.Head()
	r := n.Do("POST", nodetest.Presence, d.Token, map[string]any{"device_id": e.ID, "app_version": "1", "os_version": "1",
		"target_app_version": "1", "checks": map[string]bool{"a": true}}, nil)
	n.MustRefuse(t, before, r, http.StatusForbidden, "device_mismatch")
	r = n.Do("POST", nodetest.ClaimNext, d.Token, map[string]any{"device_id": e.ID, "session_id": d.Session},
		map[string]string{"X-Claim-Token": nodetest.NewClaimToken()})
	n.MustRefuse(t, before, r, http.StatusForbidden, "device_mismatch")
	for _, op := range []string{"start", "release"} {
		r = n.Do("POST", nodetest.DevicePath+"/tasks/"+id+"/"+op, d.Token, map[string]any{"device_id": e.ID, "claim_generation": 1,
			"expected_version": 2}, map[string]string{"X-Claim-Token": tok})
		n.MustRefuse(t, before, r, http.StatusForbidden, "device_mismatch")
		// The owner of the task naming itself, with the other device's bearer.
		r = n.Do("POST", nodetest.DevicePath+"/tasks/"+id+"/"+op, e.Token, map[string]any{"device_id": d.ID, "claim_generation": 1,
			"expected_version": 2}, map[string]string{"X-Claim-Token": tok})
		n.MustRefuse(t, before, r, http.StatusForbidden, "device_mismatch")
	}
	r = n.Do("POST", nodetest.DevicePath+"/tasks/"+id+"/heartbeat", d.Token, map[string]any{"device_id": e.ID, "claim_generation": 1,
		"execution_id": nodetest.NewID(), "step": "s"}, map[string]string{"X-Claim-Token": tok})
	n.MustRefuse(t, before, r, http.StatusForbidden, "device_mismatch")
	// The body is checked before the task: the same answer whether the
	// task exists, does not exist or is not even a UUID.
	for _, tid := range []string{nodetest.NewID(), "not-a-task"} {
		r = n.Do("POST", nodetest.DevicePath+"/tasks/"+tid+"/start", d.Token, map[string]any{"device_id": e.ID, "claim_generation": 1,
			"expected_version": 2}, map[string]string{"X-Claim-Token": tok})
		n.MustRefuse(t, before, r, http.StatusForbidden, "device_mismatch")
	}
	// d still holds its task.
	if st, _ := n.State(id); st != "CLAIMED" {
		t.Fatalf("state %s", st)
	}
}

// Another device's task answers 404 claim_not_found with a body
// byte-identical to a task that does not exist (or that the caller no
// longer holds): nothing about the task leaks.
func TestContractClaimNotFoundIdentical(t *testing.T) {
	n := nodetest.Start(t)
	d := n.ReadyDevice(t)
	e := n.ReadyDevice(t)
	f := n.ReadyDevice(t)
	n.CreateTask(nil)
	n.CreateTask(nil)
	n.CreateTask(nil)
	claimedByE, etok, _ := e.MustClaim(t)
	runningOfF, ftok, _ := f.MustClaim(t)
	fex := f.MustStart(t, runningOfF, ftok, 1, 2)
	released, dtok, _ := d.MustClaim(t)
	nodetest.Must(t, d.Call(released, "release", dtok, map[string]any{"claim_generation": 1, "expected_version": 2}, ""), http.StatusOK)
	pending := n.CreateTask(nil) // never claimed by d (d released and holds nothing)
	// release gave back the older task; make d hold nothing while pending exists

	before := n.Head()
	type target struct{ name, id, tok string }
	targets := []target{
		{"no such task", nodetest.NewID(), nodetest.NewClaimToken()},
		{"claimed by another device (its token)", claimedByE, etok},
		{"claimed by another device (own token)", claimedByE, dtok},
		{"running on another device", runningOfF, ftok},
		{"released by the caller", released, dtok},
		{"never claimed", pending, nodetest.NewClaimToken()},
		{"not a uuid", "not-a-task", nodetest.NewClaimToken()},
	}
	bodies := map[string]map[string]any{
		"start":      {"claim_generation": 1, "expected_version": 2},
		"release":    {"claim_generation": 1, "expected_version": 2},
		"heartbeat":  {"claim_generation": 1, "execution_id": fex, "step": "s"},
		"cancel-ack": {"claim_generation": 1, "execution_id": fex, "expected_version": 3},
	}
	for op, body := range bodies {
		var ref []byte
		for _, tg := range targets {
			b := map[string]any{}
			for k, v := range body {
				b[k] = v
			}
			r := d.Call(tg.id, op, tg.tok, b, "")
			n.MustRefuse(t, before, r, http.StatusNotFound, "claim_not_found")
			if ref == nil {
				ref = r.Body
			} else if !bytes.Equal(ref, r.Body) {
				t.Fatalf("%s %s: body %s differs from %s", op, tg.name, r.Body, ref)
			}
		}
	}
	// The holders are unaffected.
	if st, _ := n.State(claimedByE); st != "CLAIMED" {
		t.Fatalf("state %s", st)
	}
	if st, _ := n.State(runningOfF); st != "RUNNING" {
		t.Fatalf("state %s", st)
	}
}
