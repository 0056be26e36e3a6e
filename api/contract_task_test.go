package api_test

import (
	"net/http"
	"testing"
	"time"

	"taskledger/node/nodetest"
)

// mustDeviceReply checks the fields every device task response carries.
func mustDeviceReply(t *testing.T, r *nodetest.Resp, id, state string, version, gen uint64) map[string]any {
	t.Helper()
	m := r.JSON()
	for _, k := range []string{"task_id", "state", "version", "claim_generation", "server_time", "lease_expires_at", "cancel_requested"} {
		if _, ok := m[k]; !ok {
			t.Fatalf("device reply lacks %q: %s", k, r.Body)
		}
	}
	if nodetest.Str(m, "task_id") != id || nodetest.Str(m, "state") != state || nodetest.Num(m, "version") != version ||
		nodetest.Num(m, "claim_generation") != gen {
		t.Fatalf("want %s %s v%d g%d, got %s", id, state, version, gen, r.Body)
	}
	return m
}

// The task-scoped codes of api.md steps 3–12 for start, heartbeat,
// release and cancel-ack, each refused without appending, in the
// documented order; then the happy path with an operator cancel of a
// RUNNING task, cancel_requested on the heartbeat and cancel-ack.
func TestContractTaskCodes(t *testing.T) {
	n := nodetest.Start(t)
	d := n.ReadyDevice(t)
	a := n.CreateTask(nil)
	_, tok, _ := d.MustClaim(t)
	other := nodetest.NewClaimToken()
	call := func(op, tk string, body map[string]any) *nodetest.Resp { return d.Call(a, op, tk, body, "") }
	h := n.Head()

	// CLAIMED.
	n.MustRefuse(t, h, call("start", other, map[string]any{"claim_generation": 2, "expected_version": 9}), http.StatusForbidden, "claim_token_mismatch")
	n.MustRefuse(t, h, call("release", other, map[string]any{"claim_generation": 1, "expected_version": 2}), http.StatusForbidden, "claim_token_mismatch")
	n.MustRefuse(t, h, call("start", tok, map[string]any{"claim_generation": 2, "expected_version": 9}), http.StatusConflict, "claim_generation_mismatch")
	n.MustRefuse(t, h, call("release", tok, map[string]any{"claim_generation": 3, "expected_version": 2}), http.StatusConflict, "claim_generation_mismatch")
	n.MustRefuse(t, h, call("heartbeat", tok, map[string]any{"claim_generation": 1, "execution_id": nodetest.NewID(), "step": "s"}), http.StatusConflict, "invalid_state")
	n.MustRefuse(t, h, call("cancel-ack", tok, map[string]any{"claim_generation": 1, "execution_id": nodetest.NewID(), "expected_version": 9}), http.StatusConflict, "invalid_state")
	n.MustRefuse(t, h, call("start", tok, map[string]any{"claim_generation": 1, "expected_version": 1}), http.StatusConflict, "version_mismatch")
	n.MustRefuse(t, h, call("release", tok, map[string]any{"claim_generation": 1, "expected_version": 3}), http.StatusConflict, "version_mismatch")

	// start → RUNNING.
	st := call("start", tok, map[string]any{"claim_generation": 1, "expected_version": 2})
	nodetest.Must(t, st, http.StatusOK)
	sm := mustDeviceReply(t, st, a, "RUNNING", 3, 1)
	ex := nodetest.Str(sm, "execution_id")
	if ex == "" || sm["cancel_requested"] != false {
		t.Fatalf("start reply %s", st.Body)
	}
	srv, _ := time.Parse(time.RFC3339, nodetest.Str(sm, "server_time"))
	lease, _ := time.Parse(time.RFC3339, nodetest.Str(sm, "lease_expires_at"))
	if lease.Sub(srv) != 90*time.Second {
		t.Fatalf("running lease %v, want 90s", lease.Sub(srv))
	}
	h = n.Head()

	// RUNNING.
	n.MustRefuse(t, h, call("start", tok, map[string]any{"claim_generation": 1, "expected_version": 3}), http.StatusConflict, "invalid_state")
	n.MustRefuse(t, h, call("release", tok, map[string]any{"claim_generation": 1, "expected_version": 3}), http.StatusConflict, "invalid_state")
	n.MustRefuse(t, h, call("heartbeat", other, map[string]any{"claim_generation": 1, "execution_id": ex, "step": "s"}), http.StatusForbidden, "claim_token_mismatch")
	n.MustRefuse(t, h, call("heartbeat", tok, map[string]any{"claim_generation": 2, "execution_id": ex, "step": "s"}), http.StatusConflict, "claim_generation_mismatch")
	n.MustRefuse(t, h, call("heartbeat", tok, map[string]any{"claim_generation": 1, "execution_id": nodetest.NewID(), "step": "s"}), http.StatusConflict, "execution_mismatch")
	n.MustRefuse(t, h, call("cancel-ack", tok, map[string]any{"claim_generation": 1, "execution_id": nodetest.NewID(), "expected_version": 9}), http.StatusConflict, "execution_mismatch")
	n.MustRefuse(t, h, call("cancel-ack", tok, map[string]any{"claim_generation": 1, "execution_id": ex, "expected_version": 2}), http.StatusConflict, "version_mismatch")
	n.MustRefuse(t, h, call("cancel-ack", tok, map[string]any{"claim_generation": 1, "execution_id": ex, "expected_version": 3}), http.StatusConflict, "cancel_not_requested")

	hb := call("heartbeat", tok, map[string]any{"claim_generation": 1, "execution_id": ex, "step": "opening app"})
	nodetest.Must(t, hb, http.StatusOK)
	hm := mustDeviceReply(t, hb, a, "RUNNING", 3, 1)
	if hm["cancel_requested"] != false || nodetest.Str(hm, "step") != "opening app" || nodetest.Str(hm, "execution_id") != ex {
		t.Fatalf("heartbeat reply %s", hb.Body)
	}
	if n.Head() != h+1 {
		t.Fatalf("heartbeat appended %d events", n.Head()-h)
	}

	// Operator cancel of a RUNNING task only requests it.
	cr := n.Cancel(a)
	nodetest.Must(t, cr, http.StatusOK)
	if m := cr.JSON(); nodetest.Str(m, "state") != "RUNNING" || nodetest.Num(m, "version") != 3 || m["cancel_requested"] != true {
		t.Fatalf("cancel of RUNNING: %s", cr.Body)
	}
	hb = call("heartbeat", tok, map[string]any{"claim_generation": 1, "execution_id": ex, "step": "saw cancel"})
	nodetest.Must(t, hb, http.StatusOK)
	if m := mustDeviceReply(t, hb, a, "RUNNING", 3, 1); m["cancel_requested"] != true {
		t.Fatalf("heartbeat after cancel: %s", hb.Body)
	}
	h = n.Head()
	n.MustRefuse(t, h, call("cancel-ack", tok, map[string]any{"claim_generation": 1, "execution_id": ex, "expected_version": 4}), http.StatusConflict, "version_mismatch")
	ack := call("cancel-ack", tok, map[string]any{"claim_generation": 1, "execution_id": ex, "expected_version": 3})
	nodetest.Must(t, ack, http.StatusOK)
	mustDeviceReply(t, ack, a, "CANCELED", 4, 1)
	if st, v := n.State(a); st != "CANCELED" || v != 4 {
		t.Fatalf("after cancel-ack: %s v%d", st, v)
	}
	// The device no longer holds the task.
	h = n.Head()
	n.MustRefuse(t, h, call("heartbeat", tok, map[string]any{"claim_generation": 1, "execution_id": ex, "step": "s"}), http.StatusNotFound, "claim_not_found")
	n.MustRefuse(t, h, call("cancel-ack", tok, map[string]any{"claim_generation": 1, "execution_id": ex, "expected_version": 4}), http.StatusNotFound, "claim_not_found")
	// A terminal task cannot be canceled again.
	n.MustRefuse(t, h, n.Cancel(a), http.StatusConflict, "invalid_state")
	// The device is free again.
	b := n.CreateTask(nil)
	id, _, _ := d.MustClaim(t)
	if id != b {
		t.Fatalf("claimed %s, want %s", id, b)
	}
}

// Release returns a CLAIMED task to PENDING (version +1, no lease); an
// operator cancel of a PENDING or CLAIMED task is immediate (CANCELED,
// version +1) and the former holder is refused.
func TestContractReleaseAndImmediateCancel(t *testing.T) {
	n := nodetest.Start(t)
	d := n.ReadyDevice(t)
	a := n.CreateTask(nil)
	_, tok, _ := d.MustClaim(t)
	rel := d.Call(a, "release", tok, map[string]any{"claim_generation": 1, "expected_version": 2}, "")
	nodetest.Must(t, rel, http.StatusOK)
	if m := mustDeviceReply(t, rel, a, "PENDING", 3, 1); m["lease_expires_at"] != nil {
		t.Fatalf("released task still has a lease: %s", rel.Body)
	}
	if m := n.Task(a); m["claim"] != nil || nodetest.Str(m, "state") != "PENDING" {
		t.Fatalf("released task detail: %v", m)
	}
	h := n.Head()
	n.MustRefuse(t, h, d.Call(a, "release", tok, map[string]any{"claim_generation": 1, "expected_version": 3}, ""), http.StatusNotFound, "claim_not_found")

	// Cancel PENDING, with a wrong then the right expected_version.
	r := n.Do("POST", nodetest.AdminPath+"/tasks/"+a+"/cancel", n.AdminToken, map[string]any{"reason": "no", "expected_version": 2}, nil)
	n.MustRefuse(t, h, r, http.StatusConflict, "version_mismatch")
	r = n.Do("POST", nodetest.AdminPath+"/tasks/"+a+"/cancel", n.AdminToken, map[string]any{"reason": "no", "expected_version": 3}, nil)
	nodetest.Must(t, r, http.StatusOK)
	if m := r.JSON(); nodetest.Str(m, "state") != "CANCELED" || nodetest.Num(m, "version") != 4 {
		t.Fatalf("cancel of PENDING: %s", r.Body)
	}

	// Cancel CLAIMED.
	b := n.CreateTask(nil)
	_, tb, _ := d.MustClaim(t)
	r = n.Cancel(b)
	nodetest.Must(t, r, http.StatusOK)
	if m := r.JSON(); nodetest.Str(m, "state") != "CANCELED" || nodetest.Num(m, "version") != 3 || m["claim"] != nil {
		t.Fatalf("cancel of CLAIMED: %s", r.Body)
	}
	h = n.Head()
	n.MustRefuse(t, h, d.Call(b, "start", tb, map[string]any{"claim_generation": 1, "expected_version": 2}, ""), http.StatusNotFound, "claim_not_found")
	r, _ = d.Claim()
	nodetest.Must(t, r, http.StatusNoContent)
}
