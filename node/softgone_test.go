package node_test

import (
	"net/http"
	"testing"
	"time"

	"taskledger/commands"
	"taskledger/node/nodetest"
)

// A claim-next key answered "no task" stays expired after the collector
// deleted its record, also across a restart: a replay is 409
// idempotency_key_expired, never a claim of a task that appeared since;
// a fresh key claims it.
func TestCollectedNoTaskKeyNeverClaims(t *testing.T) {
	n := nodetest.Start(t, nodetest.WithConfig(func(c *commands.Config) { c.IdempotencyRetention = time.Hour }))
	d := n.ReadyDevice(t)
	key, tok := nodetest.NewKey(), nodetest.NewClaimToken()
	nodetest.Must(t, d.ClaimWith(key, tok), http.StatusNoContent)
	n.Advance(time.Hour)
	if got := collect(t, n); got != 1 {
		t.Fatalf("collected %d records, want 1", got)
	}
	wantSoft(t, n, 0)
	n.CreateTask(nil)
	nodetest.Must(t, d.Ready(), http.StatusOK)
	h := n.Head()
	n.MustRefuse(t, h, d.ClaimWith(key, tok), http.StatusConflict, "idempotency_key_expired")

	r := n.Restart(nodetest.WithConfig(func(c *commands.Config) { c.IdempotencyRetention = time.Hour }))
	defer r.Close()
	rd := *d
	rd.N = r
	nodetest.Must(t, rd.Ready(), http.StatusOK)
	r.MustRefuse(t, h, rd.ClaimWith(key, tok), http.StatusConflict, "idempotency_key_expired")
	got, _ := rd.Claim()
	nodetest.Must(t, got, http.StatusOK)
}
