package api_test

import (
	"net/http"
	"testing"
	"time"

	"taskledger/node/nodetest"
)

// A claim whose lease ended together with its authorization (the lease is
// capped by it) can be taken by no device. Its holder's next claim-next
// does not take a second task: it is told claim_requires_manual; the task
// shows needs_operator with the reason, is listed as needing an operator,
// and recover ends it. A device never appears to hold two claims.
func TestClaimOutlivedByItsAuthorizationNeedsAnOperator(t *testing.T) {
	for _, decision := range []string{"fail", "requeue"} {
		t.Run(decision, func(t *testing.T) {
			n := nodetest.Start(t)
			d := n.ReadyDevice(t)
			a := nodetest.Str(n.CreateTaskFor(t, map[string]any{"n": 1}, 15*time.Minute), "id")
			n.Advance(14 * time.Minute)
			nodetest.Must(t, d.Ready(), http.StatusOK)
			if got, _, _ := d.MustClaim(t); got != a {
				t.Fatalf("claimed %s, want %s", got, a)
			}
			claim := n.Task(a)["claim"].(map[string]any)
			auth := n.Task(a)["authorization"].(map[string]any)
			if claim["lease_expires_at"] != auth["expires_at"] {
				t.Fatalf("claim lease %v not capped by the authorization %v", claim["lease_expires_at"], auth["expires_at"])
			}
			b := nodetest.Str(n.CreateTaskFor(t, map[string]any{"n": 2}, time.Hour), "id")
			if needsOperator(t, n, a) {
				t.Fatalf("a live claim needs an operator")
			}

			n.Advance(time.Minute) // lease and authorization end together
			if !needsOperator(t, n, a) || n.Task(a)["needs_operator_reason"] != "authorization_expired" {
				t.Fatalf("stuck claim not shown as needing an operator: %v", n.Task(a))
			}
			if got := listedIDs(t, n, "needs_operator=true"); len(got) != 1 || got[0] != a {
				t.Fatalf("needs_operator=true lists %v, want [%s]", got, a)
			}
			nodetest.Must(t, d.Ready(), http.StatusOK)
			r, _ := d.Claim()
			nodetest.Must(t, r, http.StatusConflict, "claim_requires_manual")
			if got := listedIDs(t, n, "state=CLAIMED&device_id="+d.ID); len(got) != 1 || got[0] != a {
				t.Fatalf("CLAIMED tasks of the device: %v, want [%s]", got, a)
			}
			if st, _ := n.State(b); st != "PENDING" {
				t.Fatalf("other task %s", st)
			}

			r = recoverAt(n, a, decision, 2)
			nodetest.Must(t, r, http.StatusOK)
			want := map[string]string{"fail": "FAILED", "requeue": "PENDING"}[decision]
			if m := r.JSON(); nodetest.Str(m, "state") != want || m["needs_operator"] != false || m["needs_operator_reason"] != nil {
				t.Fatalf("after recover %s: %s", decision, r.Body)
			}
			if got, _, _ := d.MustClaim(t); got != b {
				t.Fatalf("after recovery the device claimed %s, want %s", got, b)
			}
			n.Restart().Close()
		})
	}
}
