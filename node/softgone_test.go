package node_test

import (
	"net/http"
	"testing"
	"time"

	"taskledger/commands"
	"taskledger/node/nodetest"
	"taskledger/projections"
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

// The fingerprints of collected "no task" keys are kept one more retention
// and then deleted, from memory and from the soft bucket, so a poll-only
// fleet stays bounded (D325): the key answers idempotency_key_expired up
// to twice the retention after its poll.
func TestCollectedNoTaskKeysAreForgottenAfterASecondRetention(t *testing.T) {
	retention := func(c *commands.Config) { c.IdempotencyRetention = time.Hour }
	n := nodetest.Start(t, nodetest.WithConfig(retention))
	d := n.ReadyDevice(t)
	key, tok := nodetest.NewKey(), nodetest.NewClaimToken()
	nodetest.Must(t, d.ClaimWith(key, tok), http.StatusNoContent)
	n.Advance(time.Hour)
	if got := collect(t, n); got != 1 {
		t.Fatalf("collected %d records, want 1", got)
	}
	gone := func(n *nodetest.Node) (mem, disk int) {
		n.Engine.Read(func(s *projections.State) { mem = s.Idem.GoneCount() })
		if err := n.Store.SoftRecords("idemgone/", func(string, []byte) error { disk++; return nil }); err != nil {
			t.Fatal(err)
		}
		return mem, disk
	}
	if mem, disk := gone(n); mem != 1 || disk != 1 {
		t.Fatalf("after the collection: %d fingerprints held, %d records of them on disk; want 1 and 1", mem, disk)
	}
	n.Advance(59 * time.Minute) // still within the second retention
	collect(t, n)
	nodetest.Must(t, d.Ready(), http.StatusOK)
	n.MustRefuse(t, n.Head(), d.ClaimWith(key, tok), http.StatusConflict, "idempotency_key_expired")
	n.Advance(time.Minute) // the second retention is over
	collect(t, n)
	if mem, disk := gone(n); mem != 0 || disk != 0 {
		t.Fatalf("after a second retention: %d fingerprints held, %d records on disk; want none", mem, disk)
	}
}
