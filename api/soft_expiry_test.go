package api_test

import (
	"bytes"
	"net/http"
	"testing"
	"time"

	"taskledger/commands"
	"taskledger/node/nodetest"
)

// A "no task" answer is a soft record kept for the idempotency retention
// on its own clock: the test clock's advance alone expires it, with no
// newer event. Within retention a replay answers the recorded 204, also
// after tasks appear; once expired the key is expired: 409
// idempotency_key_expired, decided before readiness (a stale presence does
// not turn it into device_not_ready), and never a claim.
func TestNoTaskRecordExpiresOnItsOwnClock(t *testing.T) {
	n := nodetest.Start(t, nodetest.WithConfig(func(c *commands.Config) { c.IdempotencyRetention = time.Hour }))
	d := n.RegisterDevice()
	nodetest.Must(t, d.Ready(), http.StatusOK)
	key, tok := nodetest.NewKey(), nodetest.NewClaimToken()
	nodetest.Must(t, d.ClaimWith(key, tok), http.StatusNoContent)
	head := n.Head()

	n.Advance(time.Hour - time.Second)
	nodetest.Must(t, d.Ready(), http.StatusOK)
	if r := d.ClaimWith(key, tok); r.Status != http.StatusNoContent || r.Header.Get("Idempotent-Replayed") != "true" {
		t.Fatalf("inside retention: want the recorded 204, got %d replayed=%q", r.Status, r.Header.Get("Idempotent-Replayed"))
	}

	n.Advance(time.Second) // no event since the record: only its own clock moved
	nodetest.Must(t, d.Ready(), http.StatusOK)
	n.MustRefuse(t, head, d.ClaimWith(key, tok), http.StatusConflict, "idempotency_key_expired")
	if n.Head() != head {
		t.Fatalf("head moved from %d to %d without a new event", head, n.Head())
	}
	// Tasks appearing do not turn it into a claim.
	n.CreateTask(nil)
	h := n.Head()
	n.MustRefuse(t, h, d.ClaimWith(key, tok), http.StatusConflict, "idempotency_key_expired")
	r, _ := d.Claim()
	nodetest.Must(t, r, http.StatusOK)
}

// The contract's order: the idempotency record (or its expiry) is decided
// before readiness. A replay of a "no task" key after retention, from a
// device whose presence is stale, is 409 idempotency_key_expired, not 409
// device_not_ready.
func TestExpiredNoTaskKeyIsDecidedBeforeReadiness(t *testing.T) {
	n := nodetest.Start(t, nodetest.WithConfig(func(c *commands.Config) { c.IdempotencyRetention = time.Hour }))
	d := n.RegisterDevice()
	nodetest.Must(t, d.Ready(), http.StatusOK)
	key, tok := nodetest.NewKey(), nodetest.NewClaimToken()
	nodetest.Must(t, d.ClaimWith(key, tok), http.StatusNoContent)
	n.Advance(time.Hour) // presence (2 min) is long stale
	n.CreateTask(nil)
	h := n.Head()
	n.MustRefuse(t, h, d.ClaimWith(key, tok), http.StatusConflict, "idempotency_key_expired")
	nodetest.Must(t, d.Ready(), http.StatusOK)
	n.MustRefuse(t, h, d.ClaimWith(key, tok), http.StatusConflict, "idempotency_key_expired")
}

// A quiet heartbeat (same step, no event) is a soft record too: within
// retention its replay answers the recorded body, also while later
// heartbeats keep the execution running; after retention, measured on its
// own clock, the key is decided afresh (a new quiet heartbeat, a new lease).
func TestQuietHeartbeatRecordExpiresOnItsOwnClock(t *testing.T) {
	n := nodetest.Start(t, nodetest.WithConfig(func(c *commands.Config) {
		c.IdempotencyRetention = time.Hour
		c.RunningLease = 10 * time.Minute
	}))
	d := n.RegisterDevice()
	run := n.StartTask(t, d, nil)
	nodetest.Must(t, run.Beat("working"), http.StatusOK) // a new step: one event
	head := n.Head()
	body := map[string]any{"claim_generation": 1, "execution_id": run.ExecutionID, "step": "working"}
	key := nodetest.NewKey()
	first := d.Call(run.TaskID, "heartbeat", run.Token, body, key)
	nodetest.Must(t, first, http.StatusOK)
	if n.Head() != head {
		t.Fatal("a heartbeat with the same step appended an event")
	}

	// Nine-minute beats with new keys keep the execution running past the
	// retention of the first one.
	for range 6 {
		n.Advance(9 * time.Minute)
		nodetest.Must(t, run.Beat("working"), http.StatusOK)
	}
	// 54 minutes: still the recorded answer.
	r := d.Call(run.TaskID, "heartbeat", run.Token, body, key)
	nodetest.Must(t, r, http.StatusOK)
	if r.Header.Get("Idempotent-Replayed") != "true" || !bytes.Equal(r.Body, first.Body) {
		t.Fatalf("inside retention: want the recorded body %s, got replayed=%q %s", first.Body, r.Header.Get("Idempotent-Replayed"), r.Body)
	}
	n.Advance(6 * time.Minute)
	nodetest.Must(t, run.Beat("working"), http.StatusOK)
	r = d.Call(run.TaskID, "heartbeat", run.Token, body, key)
	nodetest.Must(t, r, http.StatusOK)
	if r.Header.Get("Idempotent-Replayed") != "" || bytes.Equal(r.Body, first.Body) {
		t.Fatalf("after retention: want a fresh heartbeat, got replayed=%q %s", r.Header.Get("Idempotent-Replayed"), r.Body)
	}
	if n.Head() != head {
		t.Fatal("quiet heartbeats appended events")
	}
}
