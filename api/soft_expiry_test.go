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
// after tasks appear; once expired the key is forgotten (no tombstone) and
// decided afresh, which records a new 204.
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
	r := d.ClaimWith(key, tok)
	if r.Status != http.StatusNoContent || r.Header.Get("Idempotent-Replayed") != "" {
		t.Fatalf("after retention: want a fresh 204, got %d replayed=%q %s", r.Status, r.Header.Get("Idempotent-Replayed"), r.Body)
	}
	if n.Head() != head {
		t.Fatalf("head moved from %d to %d without a new event", head, n.Head())
	}

	// The fresh decision recorded a new 204: tasks appearing do not change it.
	n.CreateTask(nil)
	if r := d.ClaimWith(key, tok); r.Status != http.StatusNoContent || r.Header.Get("Idempotent-Replayed") != "true" {
		t.Fatalf("the fresh 204 is not recorded: %d replayed=%q", r.Status, r.Header.Get("Idempotent-Replayed"))
	}
	r, _ = d.Claim()
	nodetest.Must(t, r, http.StatusOK)
}

// A claim-next key whose 204 expired is decided afresh: when a task is
// claimable by then, the replay claims it (the client asked for a task
// and got none; nothing was ever changed by the first answer).
func TestExpiredNoTaskKeyClaimsWhenATaskAppeared(t *testing.T) {
	n := nodetest.Start(t, nodetest.WithConfig(func(c *commands.Config) { c.IdempotencyRetention = time.Hour }))
	d := n.RegisterDevice()
	nodetest.Must(t, d.Ready(), http.StatusOK)
	key, tok := nodetest.NewKey(), nodetest.NewClaimToken()
	nodetest.Must(t, d.ClaimWith(key, tok), http.StatusNoContent)
	n.Advance(time.Hour)
	id := n.CreateTask(nil)
	nodetest.Must(t, d.Ready(), http.StatusOK)
	r := d.ClaimWith(key, tok)
	nodetest.Must(t, r, http.StatusOK)
	if r.Header.Get("Idempotent-Replayed") != "" || nodetest.ClaimedTask(r) != id {
		t.Fatalf("want a fresh claim of %s, got task %s replayed=%q", id, nodetest.ClaimedTask(r), r.Header.Get("Idempotent-Replayed"))
	}
	// From now on the key is the claim's, an event record.
	again := d.ClaimWith(key, tok)
	nodetest.Must(t, again, http.StatusOK)
	if again.Header.Get("Idempotent-Replayed") != "true" {
		t.Fatal("the claim decided for the expired key does not replay")
	}
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
