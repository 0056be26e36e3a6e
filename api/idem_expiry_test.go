package api_test

import (
	"testing"
	"time"

	"taskledger/commands"
	"taskledger/node/nodetest"
)

// After --idempotency-retention, measured against the newest event's time,
// a key leaves only a tombstone: a replay answers 409
// idempotency_key_expired and appends nothing — also after a restart, since
// the tombstone is a function of the log. (Soft records — "no task"
// answers, quiet heartbeats — expire on their own clock and leave no
// tombstone: soft_expiry_test.go.)
func TestIdempotencyKeyExpiresAfterRetention(t *testing.T) {
	retention := func(c *commands.Config) { c.IdempotencyRetention = time.Hour }
	n := nodetest.Start(t, nodetest.WithConfig(retention))
	d := n.RegisterDevice()
	nodetest.Must(t, d.Ready(), 200)
	n.CreateTask(nil)
	key, tok := nodetest.NewKey(), nodetest.NewClaimToken()
	nodetest.Must(t, d.ClaimWith(key, tok), 200)

	// Just inside retention: still a replay.
	n.Advance(time.Hour - time.Second)
	n.CreateTask(nil) // moves the newest event's time
	r := d.ClaimWith(key, tok)
	nodetest.Must(t, r, 200)
	if r.Header.Get("Idempotent-Replayed") != "true" {
		t.Fatal("replay inside retention not marked as replayed")
	}

	// The clock alone does not expire anything: only a newer event does.
	n.Advance(time.Hour)
	nodetest.Must(t, d.ClaimWith(key, tok), 200)
	n.CreateTask(nil)
	before := n.Head()
	nodetest.Must(t, d.ClaimWith(key, tok), 409, "idempotency_key_expired")
	if n.Head() != before {
		t.Fatal("an expired key's replay appended events")
	}

	n2 := n.Restart(nodetest.WithConfig(retention))
	nodetest.Must(t, d2(n2, d).ClaimWith(key, tok), 409, "idempotency_key_expired")
}

// d2 rebinds a device to a restarted node (and reports presence again).
func d2(n *nodetest.Node, d *nodetest.Device) *nodetest.Device {
	c := *d
	c.N = n
	c.Ready()
	return &c
}
