package api_test

import (
	"net/http"
	"testing"
	"time"

	"taskledger/node/nodetest"
)

// An expired claim (now == lease_expires_at, default claim lease 10 min)
// is re-claimed by another device with generation +1; until then the
// holder is told lease_expired, afterwards claim_not_found.
func TestContractLeaseExpiredClaimReclaimed(t *testing.T) {
	n := nodetest.Start(t)
	d := n.ReadyDevice(t)
	e := n.ReadyDevice(t)
	a := n.CreateTask(nil)
	_, tok, first := d.MustClaim(t)
	fm := first.JSON()
	srv, _ := time.Parse(time.RFC3339, nodetest.Str(fm, "server_time"))
	lease, _ := time.Parse(time.RFC3339, nodetest.Str(fm, "lease_expires_at"))
	if lease.Sub(srv) != 10*time.Minute || nodetest.Str(fm["claim"].(map[string]any), "lease_expires_at") != nodetest.Str(fm, "lease_expires_at") {
		t.Fatalf("claim lease: %s", first.Body)
	}

	// One second before expiry: still held.
	n.Advance(10*time.Minute - time.Second)
	nodetest.Must(t, e.Ready(), http.StatusOK)
	r, _ := e.Claim()
	nodetest.Must(t, r, http.StatusNoContent)

	// Exactly at expiry: expired.
	n.Advance(time.Second)
	h := n.Head()
	n.MustRefuse(t, h, d.Call(a, "start", tok, map[string]any{"claim_generation": 1, "expected_version": 2}, ""), http.StatusConflict, "lease_expired")
	n.MustRefuse(t, h, d.Call(a, "release", tok, map[string]any{"claim_generation": 1, "expected_version": 2}, ""), http.StatusConflict, "lease_expired")
	etok := nodetest.NewClaimToken()
	r = e.ClaimWith(nodetest.NewKey(), etok)
	nodetest.Must(t, r, http.StatusOK)
	m := r.JSON()
	if nodetest.ClaimedTask(r) != a || nodetest.Num(m, "claim_generation") != 2 || nodetest.Num(m["claim"].(map[string]any), "generation") != 2 ||
		nodetest.Num(m, "version") != 3 || nodetest.Str(m, "state") != "CLAIMED" {
		t.Fatalf("re-claim: %s", r.Body)
	}
	detail := n.Task(a)
	if c := detail["claim"].(map[string]any); nodetest.Str(c, "device_id") != e.ID || nodetest.Num(c, "generation") != 2 {
		t.Fatalf("detail claim: %v", c)
	}

	// The former holder is refused, whatever it sends.
	h = n.Head()
	for _, gen := range []int{1, 2} {
		for _, tk := range []string{tok, etok} {
			n.MustRefuse(t, h, d.Call(a, "start", tk, map[string]any{"claim_generation": gen, "expected_version": 3}, ""), http.StatusNotFound, "claim_not_found")
			n.MustRefuse(t, h, d.Call(a, "release", tk, map[string]any{"claim_generation": gen, "expected_version": 3}, ""), http.StatusNotFound, "claim_not_found")
		}
	}
	// The new holder acts with generation 2 and its own token only.
	n.MustRefuse(t, h, e.Call(a, "start", tok, map[string]any{"claim_generation": 2, "expected_version": 3}, ""), http.StatusForbidden, "claim_token_mismatch")
	n.MustRefuse(t, h, e.Call(a, "start", etok, map[string]any{"claim_generation": 1, "expected_version": 3}, ""), http.StatusConflict, "claim_generation_mismatch")
	e.MustStart(t, a, etok, 2, 3)
	// The former holder can claim again (it holds nothing) but gets nothing.
	nodetest.Must(t, d.Ready(), http.StatusOK)
	r, _ = d.Claim()
	nodetest.Must(t, r, http.StatusNoContent)
}

// A device that holds an expired claim re-claims that task before any
// older claimable task.
func TestContractLeaseOwnExpiredClaimFirst(t *testing.T) {
	n := nodetest.Start(t)
	d := n.ReadyDevice(t)
	e := n.ReadyDevice(t)
	older := n.CreateTask(nil)
	newer := n.CreateTask(nil)
	_, etok, _ := e.MustClaim(t) // e takes the older one
	id, _, _ := d.MustClaim(t)   // d takes the newer one
	if id != newer {
		t.Fatalf("d claimed %s, want %s", id, newer)
	}
	nodetest.Must(t, e.Call(older, "release", etok, map[string]any{"claim_generation": 1, "expected_version": 2}, ""), http.StatusOK)
	n.Advance(10 * time.Minute)
	nodetest.Must(t, d.Ready(), http.StatusOK)
	tok := nodetest.NewClaimToken()
	r := d.ClaimWith(nodetest.NewKey(), tok)
	nodetest.Must(t, r, http.StatusOK)
	if nodetest.ClaimedTask(r) != newer || nodetest.Num(r.JSON(), "claim_generation") != 2 || nodetest.Num(r.JSON(), "version") != 3 {
		t.Fatalf("want own expired claim %s back with generation 2, got %s", newer, r.Body)
	}
	// It is a new claim: the new token acts, and the older task is left.
	d.MustStart(t, newer, tok, 2, 3)
	if st, _ := n.State(older); st != "PENDING" {
		t.Fatalf("older task %s", st)
	}
	// Another session re-claiming its own expired claim is no
	// claim_requires_manual either: the claim is no longer open.
	nodetest.Must(t, e.Ready(), http.StatusOK)
	id, _, _ = e.MustClaim(t)
	if id != older {
		t.Fatalf("e claimed %s", id)
	}
	n.Advance(10 * time.Minute)
	nodetest.Must(t, e.Ready(), http.StatusOK)
	e.Session = nodetest.NewID()
	r, _ = e.Claim()
	nodetest.Must(t, r, http.StatusOK)
	if nodetest.ClaimedTask(r) != older || nodetest.Num(r.JSON(), "claim_generation") != 3 {
		t.Fatalf("re-claim in a new session: %s", r.Body)
	}
}

// A running lease (90 s) that expired (now == expires_at) refuses the
// holder's heartbeat and cancel-ack (409 lease_expired, nothing appended),
// the task keeps its state, and it is never handed to another device.
func TestContractLeaseRunningExpired(t *testing.T) {
	n := nodetest.Start(t)
	d := n.ReadyDevice(t)
	e := n.ReadyDevice(t)
	a := n.CreateTask(nil)
	_, tok, _ := d.MustClaim(t)
	ex := d.MustStart(t, a, tok, 1, 2)
	beat := func(step string) *nodetest.Resp {
		return d.Call(a, "heartbeat", tok, map[string]any{"claim_generation": 1, "execution_id": ex, "step": step}, "")
	}
	// 89 s: alive; the heartbeat extends the lease to now + 90 s.
	n.Advance(89 * time.Second)
	hb := beat("at 89s")
	nodetest.Must(t, hb, http.StatusOK)
	srv, _ := time.Parse(time.RFC3339, nodetest.Str(hb.JSON(), "server_time"))
	lease, _ := time.Parse(time.RFC3339, nodetest.Str(hb.JSON(), "lease_expires_at"))
	if lease.Sub(srv) != 90*time.Second {
		t.Fatalf("heartbeat lease %v", lease.Sub(srv))
	}
	nodetest.Must(t, n.Cancel(a), http.StatusOK) // cancel requested: the ack is still refused below
	n.Advance(90 * time.Second)
	h := n.Head()
	n.MustRefuse(t, h, beat("too late"), http.StatusConflict, "lease_expired")
	n.MustRefuse(t, h, d.Call(a, "cancel-ack", tok, map[string]any{"claim_generation": 1, "execution_id": ex, "expected_version": 3}, ""), http.StatusConflict, "lease_expired")
	n.MustRefuse(t, h, d.Call(a, "start", tok, map[string]any{"claim_generation": 1, "expected_version": 3}, ""), http.StatusConflict, "lease_expired")
	n.MustRefuse(t, h, d.Call(a, "release", tok, map[string]any{"claim_generation": 1, "expected_version": 3}, ""), http.StatusConflict, "lease_expired")
	if st, v := n.State(a); st != "RUNNING" || v != 3 {
		t.Fatalf("task %s v%d", st, v)
	}
	// Never handed to another device, even much later (the authorization
	// was consumed, the claim lease long gone).
	for _, step := range []time.Duration{0, 10 * time.Minute, 2 * time.Hour} {
		n.Advance(step + time.Second)
		nodetest.Must(t, e.Ready(), http.StatusOK)
		r, _ := e.Claim()
		nodetest.Must(t, r, http.StatusNoContent)
	}
	// The holder itself is told to ask an operator.
	nodetest.Must(t, d.Ready(), http.StatusOK)
	r, _ := d.Claim()
	nodetest.MustError(t, r, http.StatusConflict, "claim_requires_manual")
	if st, v := n.State(a); st != "RUNNING" || v != 3 {
		t.Fatalf("task %s v%d", st, v)
	}
}
