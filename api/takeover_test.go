package api_test

import (
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"taskledger/node/nodetest"
)

// newTakeoverTask creates an unauthorized task and authorizes it with the given
// takeover policy ("" = the field left out).
func newTakeoverTask(t *testing.T, n *nodetest.Node, takeover string) string {
	t.Helper()
	r := n.Do("POST", nodetest.AdminPath+"/tasks", n.AdminToken, map[string]any{"payload": map[string]any{"n": 1}}, nil)
	nodetest.Must(t, r, http.StatusCreated)
	id := nodetest.Str(r.JSON(), "id")
	authorizeWithTakeover(t, n, id, 1, takeover)
	return id
}

func authorizeWithTakeover(t *testing.T, n *nodetest.Node, id string, revision uint64, takeover string) {
	t.Helper()
	body := map[string]any{"expected_revision": revision, "ttl_seconds": 3600}
	if takeover != "" {
		body["takeover"] = takeover
	}
	nodetest.Must(t, n.Do("POST", nodetest.AdminPath+"/tasks/"+id+"/authorize", n.AdminToken, body, nil), http.StatusOK)
}

// needsOperator returns the task's needs_operator field.
func needsOperator(t *testing.T, n *nodetest.Node, id string) bool {
	t.Helper()
	v, ok := n.Task(id)["needs_operator"].(bool)
	if !ok {
		t.Fatalf("task detail without a boolean needs_operator")
	}
	return v
}

// listedIDs returns the ids of GET /admin/tasks?needs_operator=true.
func listedIDs(t *testing.T, n *nodetest.Node, query string) []string {
	t.Helper()
	r := n.Do("GET", nodetest.AdminPath+"/tasks?"+query, n.AdminToken, nil, nil)
	nodetest.Must(t, r, http.StatusOK)
	var ids []string
	for _, x := range r.JSON()["tasks"].([]any) {
		ids = append(ids, nodetest.Str(x.(map[string]any), "id"))
	}
	return ids
}

// needsOperatorGauge reads taskledger_tasks_needing_operator from /metrics.
func needsOperatorGauge(t *testing.T, n *nodetest.Node) string {
	t.Helper()
	r := n.Do("GET", "/metrics", "", nil, nil)
	for _, line := range strings.Split(string(r.Body), "\n") {
		if v, ok := strings.CutPrefix(line, "taskledger_tasks_needing_operator "); ok {
			return v
		}
	}
	t.Fatalf("/metrics has no taskledger_tasks_needing_operator")
	return ""
}

func recoverAt(n *nodetest.Node, id, decision string, version uint64) *nodetest.Resp {
	return n.Do("POST", nodetest.AdminPath+"/tasks/"+id+"/recover", n.AdminToken,
		map[string]any{"decision": decision, "reason": "device went quiet", "expected_version": version}, nil)
}

// Under takeover "manual", the claim lease expiring (now == lease expiry)
// hands the task to an operator: no device claims it, the holder is told
// lease_expired / claim_requires_manual, and only recover moves it.
func TestManualTakeoverAtClaimLeaseExpiry(t *testing.T) {
	n := nodetest.Start(t)
	d := n.ReadyDevice(t)
	e := n.ReadyDevice(t)
	a := newTakeoverTask(t, n, "manual")
	id, tok, cr := d.MustClaim(t)
	if id != a {
		t.Fatalf("claimed %s, want %s", id, a)
	}
	if c := cr.JSON()["claim"].(map[string]any); c["takeover"] != "manual" {
		t.Fatalf("claim answer %s", cr.Body)
	}

	n.Advance(10*time.Minute - time.Second)
	if needsOperator(t, n, a) || len(listedIDs(t, n, "needs_operator=true")) != 0 || needsOperatorGauge(t, n) != "0" {
		t.Fatalf("a live claim needs an operator")
	}
	nodetest.Must(t, e.Ready(), http.StatusOK)
	nodetest.Must(t, claimAnswer(e), http.StatusNoContent)

	n.Advance(time.Second) // exactly at the claim lease expiry
	if !needsOperator(t, n, a) {
		t.Fatalf("an expired manual claim does not need an operator: %v", n.Task(a))
	}
	if au := n.Task(a)["authorization"].(map[string]any); au["takeover"] != "manual" {
		t.Fatalf("authorization document %v", au)
	}
	if got := listedIDs(t, n, "needs_operator=true"); len(got) != 1 || got[0] != a {
		t.Fatalf("needs_operator=true lists %v, want [%s]", got, a)
	}
	if got := listedIDs(t, n, "needs_operator=false&state=CLAIMED"); len(got) != 0 {
		t.Fatalf("needs_operator=false lists %v", got)
	}
	if g := needsOperatorGauge(t, n); g != "1" {
		t.Fatalf("taskledger_tasks_needing_operator = %s, want 1", g)
	}
	nodetest.Must(t, e.Ready(), http.StatusOK)
	nodetest.Must(t, d.Ready(), http.StatusOK)
	h := n.Head()
	nodetest.Must(t, claimAnswer(e), http.StatusNoContent)
	n.MustUnchanged(t, h)
	n.MustRefuse(t, h, d.Call(a, "start", tok, map[string]any{"claim_generation": 1, "expected_version": 2}, ""), http.StatusConflict, "lease_expired")
	n.MustRefuse(t, h, d.Call(a, "lease/renew", tok, map[string]any{"claim_generation": 1, "session_id": d.Session,
		"expected_lease_expires_at": n.Task(a)["claim"].(map[string]any)["lease_expires_at"]}, ""), http.StatusConflict, "lease_expired")

	// The holder's own claim-next never re-claims it, nor takes another task.
	other := newTakeoverTask(t, n, "")
	r, _ := d.Claim()
	nodetest.Must(t, r, http.StatusConflict, "claim_requires_manual")
	if st, v := n.State(a); st != "CLAIMED" || v != 2 {
		t.Fatalf("task after refusals: %s v%d", st, v)
	}
	// Another device takes the other task, never the one that needs a person.
	if got, _, _ := e.MustClaim(t); got != other {
		t.Fatalf("e claimed %s, want %s", got, other)
	}

	// The operator requeues: PENDING, a new authorization needed.
	r = recoverAt(n, a, "requeue", 2)
	nodetest.Must(t, r, http.StatusOK)
	if m := r.JSON(); nodetest.Str(m, "state") != "PENDING" || m["needs_operator"] != false || needsOperatorGauge(t, n) != "0" {
		t.Fatalf("after requeue: %s", r.Body)
	}
	f := n.ReadyDevice(t)
	nodetest.Must(t, claimAnswer(f), http.StatusNoContent)
	authorizeWithTakeover(t, n, a, 1, "manual")
	if got, _, r := f.MustClaim(t); got != a || nodetest.Num(r.JSON(), "claim_generation") != 2 {
		t.Fatalf("after re-authorization f claimed %s: %s", got, r.Body)
	}
	n.Restart().Close() // the log, rebuilt and verified, agrees
}

// Under "manual", revoking the holder makes the task need an operator at
// once; at the claim lease expiry no device takes it (under "reclaim" the
// next claim does); recover fail ends it.
func TestManualTakeoverAfterRevocation(t *testing.T) {
	for _, policy := range []string{"manual", "reclaim"} {
		t.Run(policy, func(t *testing.T) {
			n := nodetest.Start(t)
			d := n.ReadyDevice(t)
			a := newTakeoverTask(t, n, policy)
			d.MustClaim(t)
			nodetest.Must(t, n.Do("POST", nodetest.AdminPath+"/devices/"+d.ID+"/revoke", n.AdminToken, map[string]any{"reason": "lost"}, nil), http.StatusOK)
			if got := needsOperator(t, n, a); got != (policy == "manual") {
				t.Fatalf("needs_operator after revocation = %v", got)
			}
			e := n.ReadyDevice(t)
			n.Advance(10*time.Minute - time.Second)
			nodetest.Must(t, e.Ready(), http.StatusOK)
			nodetest.Must(t, claimAnswer(e), http.StatusNoContent)
			n.Advance(time.Second)
			nodetest.Must(t, e.Ready(), http.StatusOK)
			r, _ := e.Claim()
			if policy == "reclaim" {
				nodetest.Must(t, r, http.StatusOK)
				if nodetest.ClaimedTask(r) != a {
					t.Fatalf("reclaim took %s", nodetest.ClaimedTask(r))
				}
				return
			}
			nodetest.Must(t, r, http.StatusNoContent)
			r = recoverAt(n, a, "fail", 2)
			nodetest.Must(t, r, http.StatusOK)
			if m := r.JSON(); nodetest.Str(m, "state") != "FAILED" || m["needs_operator"] != false {
				t.Fatalf("after recover fail: %s", r.Body)
			}
		})
	}
}

// 64 devices race for one task whose claim lease just expired: none gets
// it under "manual", exactly one under "reclaim".
func TestTakeoverRaceAfterExpiry(t *testing.T) {
	for _, tc := range []struct {
		policy string
		want   int
	}{{"manual", 0}, {"reclaim", 1}} {
		t.Run(tc.policy, func(t *testing.T) {
			n := nodetest.Start(t)
			holder := n.ReadyDevice(t)
			a := newTakeoverTask(t, n, tc.policy)
			holder.MustClaim(t)
			devs := make([]*nodetest.Device, 64)
			for i := range devs {
				devs[i] = n.RegisterDevice()
			}
			n.Advance(10 * time.Minute)
			for _, d := range devs {
				nodetest.Must(t, d.Ready(), http.StatusOK)
			}
			var wg sync.WaitGroup
			codes := make([]*nodetest.Resp, len(devs))
			start := make(chan struct{})
			for i, d := range devs {
				wg.Add(1)
				go func() {
					defer wg.Done()
					<-start
					codes[i], _ = d.Claim()
				}()
			}
			close(start)
			wg.Wait()
			got := 0
			for _, r := range codes {
				switch r.Status {
				case http.StatusOK:
					got++
					if nodetest.ClaimedTask(r) != a {
						t.Fatalf("claimed %s", nodetest.ClaimedTask(r))
					}
				case http.StatusNoContent:
				default:
					t.Fatalf("claim answered %d %s", r.Status, r.Body)
				}
			}
			if got != tc.want {
				t.Fatalf("%d claims under %s, want %d", got, tc.policy, tc.want)
			}
		})
	}
}

// A takeover policy other than reclaim or manual is refused and changes
// nothing.
func TestAuthorizeRejectsUnknownTakeover(t *testing.T) {
	n := nodetest.Start(t)
	r := n.Do("POST", nodetest.AdminPath+"/tasks", n.AdminToken, map[string]any{"payload": map[string]any{"n": 1}}, nil)
	a := nodetest.Str(r.JSON(), "id")
	for _, v := range []any{"never", "", "MANUAL", 1, true} {
		h := n.Head()
		r := n.Do("POST", nodetest.AdminPath+"/tasks/"+a+"/authorize", n.AdminToken,
			map[string]any{"expected_revision": 1, "ttl_seconds": 3600, "takeover": v}, nil)
		n.MustRefuse(t, h, r, http.StatusBadRequest, "invalid_request")
	}
	if _, err := listTasks(n, "needs_operator=yes"); err != http.StatusBadRequest {
		t.Fatalf("needs_operator=yes answered %d", err)
	}
}

func listTasks(n *nodetest.Node, q string) (*nodetest.Resp, int) {
	r := n.Do("GET", nodetest.AdminPath+"/tasks?"+q, n.AdminToken, nil, nil)
	return r, r.Status
}

// claimAnswer sends claim-next with a new key and token.
func claimAnswer(d *nodetest.Device) *nodetest.Resp {
	r, _ := d.Claim()
	return r
}
