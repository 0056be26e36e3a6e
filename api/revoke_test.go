package api_test

// Device revocation: the revoke route, the device list and
// detail, a revoked token rejected at authentication, a claim sequenced
// before the revocation staying with its task until an operator recovers
// it (or its lease expires), device_revoked at sequencing, and 100 rounds
// of a revocation racing a claim.

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"taskledger/commands"
	"taskledger/node/nodetest"
)

// noDeviceToken fails if a device document shows a token or its hash.
func noDeviceToken(t *testing.T, what string, body []byte, d *nodetest.Device) {
	t.Helper()
	if bytes.Contains(body, []byte(d.Token)) || bytes.Contains(body, []byte(commands.HashToken(d.Token))) ||
		bytes.Contains(body, []byte(`"token"`)) {
		t.Fatalf("%s shows a device token or its hash: %s", what, body)
	}
}

func TestRevokeDevice(t *testing.T) {
	n := nodetest.Start(t)
	d := n.ReadyDevice(t)
	d2 := n.ReadyDevice(t)
	id := n.CreateTask(nil)
	_, tok, _ := d.MustClaim(t)

	list := n.Admin("GET", "/devices", nil)
	nodetest.Must(t, list, 200)
	noDeviceToken(t, "GET /admin/devices", list.Body, d)
	var docs struct {
		Devices []map[string]any `json:"devices"`
	}
	if err := json.Unmarshal(list.Body, &docs); err != nil || len(docs.Devices) != 2 {
		t.Fatalf("device list: %s", list.Body)
	}

	key := nodetest.NewKey()
	r := n.Do("POST", "/api/v1/admin/devices/"+d.ID+"/revoke", n.AdminToken, map[string]any{"reason": "lost phone"},
		map[string]string{"Idempotency-Key": key})
	nodetest.Must(t, r, 200)
	doc := r.JSON()
	if doc["device_id"] != d.ID || doc["status"] != "REVOKED" || doc["open_task_id"] != id {
		t.Fatalf("revoke answer: %s", r.Body)
	}
	noDeviceToken(t, "the revoke answer", r.Body, d)
	again := n.Do("POST", "/api/v1/admin/devices/"+d.ID+"/revoke", n.AdminToken, map[string]any{"reason": "lost phone"},
		map[string]string{"Idempotency-Key": key})
	nodetest.Must(t, again, 200)
	if again.Header.Get("Idempotent-Replayed") != "true" {
		t.Fatal("revoke replay not marked replayed")
	}
	nodetest.Must(t, n.Revoke(d.ID), 409, "invalid_state")
	nodetest.Must(t, n.Revoke(nodetest.NewKey()), 404, "device_not_found")

	// The revoked token is unknown at authentication, on every route.
	for name, r := range map[string]*nodetest.Resp{
		"heartbeat":  d.Ready(),
		"claim-next": d.ClaimWith(nodetest.NewKey(), nodetest.NewClaimToken()),
		"start":      d.Start(id, tok, 1, 2),
		"admin":      n.Do("GET", "/api/v1/admin/devices", d.Token, nil, nil),
	} {
		if r.Status != 401 || len(r.Body) != 0 || r.Header.Get("WWW-Authenticate") != "Bearer" {
			t.Errorf("%s with a revoked token: %d %q %v, want 401 with an empty body", name, r.Status, r.Body, r.Header)
		}
	}

	det := n.Admin("GET", "/devices/"+d.ID, nil)
	nodetest.Must(t, det, 200)
	noDeviceToken(t, "GET /admin/devices/{id}", det.Body, d)
	if det.JSON()["status"] != "REVOKED" || det.JSON()["owner_id"] != d.OwnerID {
		t.Fatalf("device detail: %s", det.Body)
	}
	nodetest.Must(t, n.Admin("GET", "/devices/"+nodetest.NewKey(), nil), 404, "device_not_found")
	if st := n.Admin("GET", "/devices/"+d2.ID, nil).JSON()["status"]; st != "ACTIVE" {
		t.Fatalf("the other device is %v", st)
	}

	// The claim sequenced before the revocation stays with its task.
	task := n.Task(id)
	if task["state"] != "CLAIMED" || nodetest.Obj(task, "claim")["device_id"] != d.ID {
		t.Fatalf("after revocation the task is %v held by %v", task["state"], nodetest.Obj(task, "claim")["device_id"])
	}
	r, _ = d2.Claim()
	nodetest.Must(t, r, 204)

	// Only an operator recovers it; requeued, it needs a new authorization.
	r = n.Admin("POST", "/tasks/"+id+"/recover", map[string]any{"decision": "requeue", "reason": "device revoked", "expected_version": 2})
	nodetest.Must(t, r, 200)
	if r.JSON()["state"] != "PENDING" || nodetest.Num(r.JSON(), "version") != 3 || r.JSON()["claim"] != nil {
		t.Fatalf("recover: %s", r.Body)
	}
	if det := n.Admin("GET", "/devices/"+d.ID, nil).JSON(); det["open_task_id"] != nil {
		t.Fatalf("the revoked device still shows an open task: %v", det)
	}
	r, _ = d2.Claim()
	nodetest.Must(t, r, 204)
	nodetest.Must(t, n.Authorize(id, 1, time.Hour), 200)
	got, _, claim12 := d2.MustClaim(t)
	m := claim12.JSON()
	if got != id || nodetest.Num(m, "claim_generation") != 2 {
		t.Fatalf("claimed %s generation %v", got, m["claim_generation"])
	}
}

func TestRevokedDevicesExpiredClaimGoesToAnotherDevice(t *testing.T) {
	n := nodetest.Start(t)
	d := n.ReadyDevice(t)
	id := n.CreateTask(nil)
	d.MustClaim(t)
	nodetest.Must(t, n.Revoke(d.ID), 200)
	n.Advance(10 * time.Minute)
	d2 := n.ReadyDevice(t)
	got, _, claim13 := d2.MustClaim(t)
	m := claim13.JSON()
	if got != id || nodetest.Num(m, "claim_generation") != 2 {
		t.Fatalf("claimed %s generation %v, want the revoked device's expired claim", got, m["claim_generation"])
	}
}

func TestRecoverRunningTaskOfRevokedDevice(t *testing.T) {
	n := nodetest.Start(t)
	d := n.ReadyDevice(t)
	id := n.CreateTask(nil)
	_, tok, _ := d.MustClaim(t)
	nodetest.Must(t, d.Start(id, tok, 1, 2), 200)
	recover := map[string]any{"decision": "fail", "reason": "phone stolen", "expected_version": 3}
	nodetest.Must(t, n.Admin("POST", "/tasks/"+id+"/recover", recover), 409, "lease_not_expired")
	nodetest.Must(t, n.Revoke(d.ID), 200)
	// Revoked: the operator may recover at once, the running lease still valid.
	r := n.Admin("POST", "/tasks/"+id+"/recover", recover)
	nodetest.Must(t, r, 200)
	if r.JSON()["state"] != "FAILED" || nodetest.Obj(r.JSON(), "recovery")["decision"] != "fail" {
		t.Fatalf("recover: %s", r.Body)
	}
}

// A revocation sequenced before a device command makes it fail with
// device_revoked, replays included. Over HTTP the revoked token is already
// refused at authentication, so this drives the sequencer directly with
// the principal the api authenticated before the revocation.
func TestDeviceRevokedAtSequencing(t *testing.T) {
	n := nodetest.Start(t)
	d := n.ReadyDevice(t)
	id := n.CreateTask(nil)
	key := nodetest.NewKey()
	tok := nodetest.NewClaimToken()
	nodetest.Must(t, d.ClaimWith(key, tok), 200)
	startKey := nodetest.NewKey()
	nodetest.Must(t, d.Call(id, "start", tok, map[string]any{"claim_generation": 1, "expected_version": 2}, startKey), 200)
	nodetest.Must(t, n.Revoke(d.ID), 200)

	p := commands.Principal{DeviceID: d.ID, OwnerID: d.OwnerID}
	head := n.Head()
	for name, cmd := range map[string]commands.Command{
		"claim-next (new key)": &commands.ClaimNext{Device: p, Key: nodetest.NewKey(), Fingerprint: []byte("x"), SessionID: d.Session,
			TokenHash: commands.HashToken(nodetest.NewClaimToken())},
		"claim-next (replay)": &commands.ClaimNext{Device: p, Key: key, Fingerprint: []byte("x"), SessionID: d.Session,
			TokenHash: commands.HashToken(tok)},
		"start (replay)": &commands.TaskCall{Op: commands.OpStart, Device: p, TaskID: id, Key: startKey, Fingerprint: []byte("x"),
			TokenHash: commands.HashToken(tok), Generation: 1, Version: 2},
		"heartbeat": &commands.TaskCall{Op: commands.OpHeartbeat, Device: p, TaskID: id, Key: nodetest.NewKey(), Fingerprint: []byte("x"),
			TokenHash: commands.HashToken(tok), Generation: 1, Step: "s"},
	} {
		if _, err := n.Engine.Do(context.Background(), cmd); !errors.Is(err, commands.ErrDeviceRevoked) {
			t.Errorf("%s after revocation: %v, want device_revoked", name, err)
		}
	}
	if n.Head() != head {
		t.Fatal("refused commands appended events")
	}
}

// logEvent is an event of GET /admin/events.
type logEvent struct {
	Seq  uint64         `json:"seq"`
	Type string         `json:"type"`
	Body map[string]any `json:"body"`
}

func TestRevocationRacesClaim100Rounds(t *testing.T) {
	n := nodetest.Start(t)
	outcomes := map[string]int{}
	for round := range 100 {
		d := n.ReadyDevice(t)
		id := n.CreateTask(map[string]any{"round": round})
		after := n.Head()

		var claim, revoke *nodetest.Resp
		start := make(chan struct{})
		var wg sync.WaitGroup
		wg.Add(2)
		go func() {
			defer wg.Done()
			<-start
			claim = n.Try("POST", "/api/v1/device/tasks/claim-next", d.Token, map[string]any{"device_id": d.ID, "session_id": d.Session},
				map[string]string{"X-Claim-Token": nodetest.NewClaimToken()})

		}()
		go func() {
			defer wg.Done()
			<-start
			revoke = n.Try("POST", "/api/v1/admin/devices/"+d.ID+"/revoke", n.AdminToken, map[string]any{"reason": "race"}, nil)
		}()
		close(start)
		wg.Wait()
		if revoke.Err != nil || revoke.Status != 200 {
			t.Fatalf("round %d: revoke %d %s (err %v)", round, revoke.Status, revoke.Body, revoke.Err)
		}
		if claim.Err != nil {
			t.Fatalf("round %d: claim: %v", round, claim.Err)
		}
		outcome := fmt.Sprint(claim.Status)
		switch {
		case claim.Status == 200:
			if got := nodetest.Str(nodetest.Obj(claim.JSON(), "task"), "id"); got != id {
				t.Fatalf("round %d: claimed %s, want %s", round, got, id)
			}
		case claim.Status == 401:
		case claim.Status == 403 && claim.Code() == "device_revoked":
			outcome += " device_revoked"
		default:
			t.Fatalf("round %d: claim %d %s, want 200, 401 or 403 device_revoked", round, claim.Status, claim.Body)
		}
		outcomes[outcome]++

		// The global log: the revocation once, and the claim (if any)
		// before it.
		r := n.Admin("GET", fmt.Sprintf("/events?after=%d&limit=1000", after), nil)
		nodetest.Must(t, r, 200)
		var log struct {
			Events []logEvent `json:"events"`
		}
		if err := json.Unmarshal(r.Body, &log); err != nil {
			t.Fatal(err)
		}
		var revokedAt uint64
		var claims []logEvent
		for _, e := range log.Events {
			switch {
			case e.Type == "device.revoked" && e.Body["device_id"] == d.ID:
				if revokedAt != 0 {
					t.Fatalf("round %d: two revocations", round)
				}
				revokedAt = e.Seq
			case e.Type == "task.claimed" && e.Body["device_id"] == d.ID:
				claims = append(claims, e)
			}
		}
		if revokedAt == 0 {
			t.Fatalf("round %d: no device.revoked in the log", round)
		}
		switch {
		case len(claims) > 1:
			t.Fatalf("round %d: %d claims by one device", round, len(claims))
		case len(claims) == 1 && claims[0].Seq > revokedAt:
			t.Fatalf("round %d: claim at seq %d after the revocation at %d", round, claims[0].Seq, revokedAt)
		case claim.Status == 200 && (len(claims) != 1 || claims[0].Body["task_id"] != id):
			t.Fatalf("round %d: a claim answered 200 is not in the log before the revocation", round)
		case claim.Status != 200 && len(claims) != 0:
			t.Fatalf("round %d: a refused claim is in the log", round)
		}

		// The task's own history agrees, and a claim stays with its task.
		claimedInHistory := 0
		for _, e := range n.Events(t, id) {
			if e["type"] == "task.claimed" {
				claimedInHistory++
			}
		}
		task := n.Task(id)
		if claim.Status == 200 {
			if claimedInHistory != 1 || task["state"] != "CLAIMED" || nodetest.Obj(task, "claim")["device_id"] != d.ID {
				t.Fatalf("round %d: the claim did not stay with its task: %v", round, task)
			}
		} else if claimedInHistory != 0 || task["state"] != "PENDING" {
			t.Fatalf("round %d: unclaimed task is %v with %d claims", round, task["state"], claimedInHistory)
		}
		// Clear the round's task so the next round's device claims its own.
		nodetest.Must(t, n.Admin("POST", "/tasks/"+id+"/cancel", map[string]any{"reason": "round over"}), 200)
	}
	t.Logf("claim outcomes over 100 rounds: %v", outcomes)
}
