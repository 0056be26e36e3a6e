package api_test

// Renew: compare-and-set on expected_lease_expires_at, the new
// expiry min(now + claim lease, authorization expiry), nothing else
// changes, no grace, replays answer what was recorded, and 16 concurrent
// renewals of one claim have exactly one winner.

import (
	"bytes"
	"sync"
	"testing"
	"time"

	"taskledger/node/nodetest"
)

// claimedTask is a claim made for a renew test.
type claimedTask struct {
	d     *nodetest.Device
	id    string
	tok   string
	lease int64
}

func claimOne(t *testing.T, n *nodetest.Node, ttl time.Duration) *claimedTask {
	t.Helper()
	d := n.ReadyDevice(t)
	n.CreateTaskFor(t, map[string]any{"n": 1}, ttl)
	id, tok, claim10 := d.MustClaim(t)
	m := claim10.JSON()
	return &claimedTask{d: d, id: id, tok: tok, lease: nodetest.Millis(t, m["lease_expires_at"])}
}

func TestRenewCompareAndSet(t *testing.T) {
	n := nodetest.Start(t)
	c := claimOne(t, n, time.Hour)
	n.Advance(time.Minute)
	now := n.Engine.Now()

	r := c.d.Renew(c.id, c.tok, 1, c.d.Session, c.lease, "")
	nodetest.Must(t, r, 200)
	m := r.JSON()
	renewed := nodetest.Millis(t, m["lease_expires_at"])
	if renewed != now+(10*time.Minute).Milliseconds() {
		t.Fatalf("renewed to %s, want now + claim lease %s", nodetest.FormatMillis(renewed), nodetest.FormatMillis(now+(10*time.Minute).Milliseconds()))
	}
	if m["state"] != "CLAIMED" || nodetest.Num(m, "version") != 2 || nodetest.Num(m, "claim_generation") != 1 {
		t.Fatalf("renew changed state, version or generation: %s", r.Body)
	}
	detail := n.Task(c.id)
	claim := nodetest.Obj(detail, "claim")
	if nodetest.Millis(t, claim["lease_expires_at"]) != renewed || nodetest.Num(claim, "generation") != 1 ||
		nodetest.Num(detail, "version") != 2 || claim["token_origin"] != "client" {
		t.Fatalf("detail after renew: %v", detail)
	}
	evs := n.Events(t, c.id)
	last := nodetest.Obj(evs[len(evs)-1], "body")
	if evs[len(evs)-1]["type"] != "task.claim_renewed" || nodetest.Millis(t, last["previous_lease_expires_at"]) != c.lease ||
		nodetest.Millis(t, last["lease_expires_at"]) != renewed {
		t.Fatalf("renew event: %v", evs[len(evs)-1])
	}

	// Refusals append nothing, in api.md's order.
	other := n.ReadyDevice(t)
	head := n.Head()
	nodetest.Must(t, c.d.Renew(c.id, c.tok, 1, c.d.Session, c.lease, ""), 409, "lease_expectation_mismatch")
	nodetest.Must(t, c.d.Renew(c.id, c.tok, 1, nodetest.NewKey(), renewed, ""), 409, "session_mismatch")
	nodetest.Must(t, c.d.Renew(c.id, c.tok, 1, nodetest.NewKey(), c.lease, ""), 409, "session_mismatch")
	nodetest.Must(t, c.d.Renew(c.id, c.tok, 2, c.d.Session, renewed, ""), 409, "claim_generation_mismatch")
	nodetest.Must(t, c.d.Renew(c.id, nodetest.NewClaimToken(), 1, c.d.Session, renewed, ""), 403, "claim_token_mismatch")
	nodetest.Must(t, other.Renew(c.id, c.tok, 1, c.d.Session, renewed, ""), 404, "claim_not_found")
	if n.Head() != head {
		t.Fatal("refused renewals appended events")
	}

	// The token did not change: it still starts the task.
	nodetest.Must(t, c.d.Start(c.id, c.tok, 1, 2), 200)
	nodetest.Must(t, c.d.Renew(c.id, c.tok, 1, c.d.Session, renewed, ""), 409, "invalid_state")
}

func TestRenewCappedAtAuthorizationExpiry(t *testing.T) {
	n := nodetest.Start(t)
	c := claimOne(t, n, 15*time.Minute)
	authExp := nodetest.Millis(t, nodetest.Obj(n.Task(c.id), "authorization")["expires_at"])
	n.Advance(400 * time.Second)
	r := c.d.Renew(c.id, c.tok, 1, c.d.Session, c.lease, "")
	nodetest.Must(t, r, 200)
	if got := nodetest.Millis(t, r.JSON()["lease_expires_at"]); got != authExp {
		t.Fatalf("renewed to %s, want the authorization's expiry %s", nodetest.FormatMillis(got), nodetest.FormatMillis(authExp))
	}
	// At the cap, a renew succeeds without extending.
	n.Advance(100 * time.Second)
	r = c.d.Renew(c.id, c.tok, 1, c.d.Session, authExp, "")
	nodetest.Must(t, r, 200)
	if got := nodetest.Millis(t, r.JSON()["lease_expires_at"]); got != authExp {
		t.Fatalf("renewed past the authorization: %s", nodetest.FormatMillis(got))
	}
}

func TestRenewAtExpiryIsExpiredAndNeverRevived(t *testing.T) {
	n := nodetest.Start(t)
	c := claimOne(t, n, time.Hour)
	n.Advance(time.Duration(c.lease-n.Engine.Now()) * time.Millisecond) // now == lease_expires_at
	head := n.Head()
	nodetest.Must(t, c.d.Renew(c.id, c.tok, 1, c.d.Session, c.lease, ""), 409, "lease_expired")
	n.Advance(time.Second)
	nodetest.Must(t, c.d.Renew(c.id, c.tok, 1, c.d.Session, c.lease, ""), 409, "lease_expired")
	if n.Head() != head {
		t.Fatal("a renew of an expired lease appended an event")
	}
	if nodetest.Millis(t, nodetest.Obj(n.Task(c.id), "claim")["lease_expires_at"]) != c.lease {
		t.Fatal("the expired lease moved")
	}
	// The expired claim goes to the next device.
	other := n.ReadyDevice(t)
	got, _, claim11 := other.MustClaim(t)
	m := claim11.JSON()
	if got != c.id || nodetest.Num(m, "claim_generation") != 2 {
		t.Fatalf("re-claim: %s generation %v", got, m["claim_generation"])
	}
	nodetest.Must(t, c.d.Renew(c.id, c.tok, 1, c.d.Session, c.lease, ""), 404, "claim_not_found")
}

func TestRenewReplay(t *testing.T) {
	n := nodetest.Start(t)
	c := claimOne(t, n, time.Hour)
	n.Advance(time.Minute)
	k1 := nodetest.NewKey()
	first := c.d.Renew(c.id, c.tok, 1, c.d.Session, c.lease, k1)
	nodetest.Must(t, first, 200)
	l1 := nodetest.Millis(t, first.JSON()["lease_expires_at"])
	head := n.Head()

	again := c.d.Renew(c.id, c.tok, 1, c.d.Session, c.lease, k1)
	nodetest.Must(t, again, 200)
	if again.Header.Get("Idempotent-Replayed") != "true" || !bytes.Equal(again.Body, first.Body) {
		t.Fatalf("replay: %v %s, want the recorded %s", again.Header, again.Body, first.Body)
	}
	if n.Head() != head {
		t.Fatal("a replay appended an event")
	}

	// A second renewal moves the lease; the first key still answers what
	// it recorded (no second compare-and-set).
	n.Advance(time.Minute)
	k2 := nodetest.NewKey()
	r2 := c.d.Renew(c.id, c.tok, 1, c.d.Session, l1, k2)
	nodetest.Must(t, r2, 200)
	l2 := nodetest.Millis(t, r2.JSON()["lease_expires_at"])
	again = c.d.Renew(c.id, c.tok, 1, c.d.Session, c.lease, k1)
	nodetest.Must(t, again, 200)
	if got := nodetest.Millis(t, again.JSON()["lease_expires_at"]); got != l1 || again.Header.Get("Idempotent-Replayed") != "true" {
		t.Fatalf("replay of the first renewal: %s, want its recorded %s", again.Body, nodetest.FormatMillis(l1))
	}
	nodetest.Must(t, c.d.Renew(c.id, c.tok, 1, c.d.Session, l2, k1), 409, "idempotency_conflict")

	// Once the lease expired, replays are refused.
	n.Advance(time.Duration(l2-n.Engine.Now()) * time.Millisecond)
	head = n.Head()
	nodetest.Must(t, c.d.Renew(c.id, c.tok, 1, c.d.Session, l1, k2), 409, "claim_replay_expired")
	nodetest.Must(t, c.d.Renew(c.id, c.tok, 1, c.d.Session, c.lease, k1), 409, "claim_replay_expired")
	if n.Head() != head {
		t.Fatal("an expired replay appended an event")
	}
}

func TestRenewRace16(t *testing.T) {
	n := nodetest.Start(t)
	c := claimOne(t, n, time.Hour)
	n.Advance(time.Minute)
	want := n.Engine.Now() + (10 * time.Minute).Milliseconds()
	head := n.Head()

	const racers = 16
	answers := make([]*nodetest.Resp, racers)
	keys := make([]string, racers)
	body := map[string]any{"device_id": c.d.ID, "claim_generation": 1, "session_id": c.d.Session,
		"expected_lease_expires_at": nodetest.FormatMillis(c.lease)}
	path := "/api/v1/device/tasks/" + c.id + "/lease/renew"
	start := make(chan struct{})
	var wg sync.WaitGroup
	for i := range racers {
		keys[i] = nodetest.NewKey()
		wg.Add(1)
		go func() {
			defer wg.Done()
			<-start
			answers[i] = n.Try("POST", path, c.d.Token, body, map[string]string{"Idempotency-Key": keys[i], "X-Claim-Token": c.tok})
		}()
	}
	close(start)
	wg.Wait()

	winner := -1
	for i, a := range answers {
		switch {
		case a.Err != nil:
			t.Fatalf("renew %d: %v", i, a.Err)
		case a.Status == 200:
			if winner >= 0 {
				t.Fatalf("two renewals won: %d and %d", winner, i)
			}
			winner = i
		case a.Status != 409 || a.Code() != "lease_expectation_mismatch":
			t.Fatalf("renew %d: %d %s, want 200 or 409 lease_expectation_mismatch", i, a.Status, a.Body)
		}
	}
	if winner < 0 {
		t.Fatal("no renewal won")
	}
	if got := nodetest.Millis(t, answers[winner].JSON()["lease_expires_at"]); got != want {
		t.Fatalf("winner renewed to %s, want %s", nodetest.FormatMillis(got), nodetest.FormatMillis(want))
	}
	if n.Head() != head+1 {
		t.Fatalf("the race appended %d events, want 1", n.Head()-head)
	}

	// Concurrent replays of the winner return the same expiry.
	replays := make([]*nodetest.Resp, 8)
	start = make(chan struct{})
	for i := range replays {
		wg.Add(1)
		go func() {
			defer wg.Done()
			<-start
			replays[i] = n.Try("POST", path, c.d.Token, body, map[string]string{"Idempotency-Key": keys[winner], "X-Claim-Token": c.tok})
		}()
	}
	close(start)
	wg.Wait()
	for i, a := range replays {
		if a.Err != nil || a.Status != 200 || a.Header.Get("Idempotent-Replayed") != "true" {
			t.Fatalf("replay %d: %d %s (err %v)", i, a.Status, a.Body, a.Err)
		}
		if got := nodetest.Millis(t, a.JSON()["lease_expires_at"]); got != want {
			t.Fatalf("replay %d: lease %s, want %s", i, nodetest.FormatMillis(got), nodetest.FormatMillis(want))
		}
	}
	if n.Head() != head+1 {
		t.Fatal("replays appended events")
	}
	renewals := 0
	for _, e := range n.Events(t, c.id) {
		if e["type"] == "task.claim_renewed" {
			renewals++
		}
	}
	if renewals != 1 {
		t.Fatalf("%d task.claim_renewed events, want 1", renewals)
	}
}
