package api_test

import (
	"net/http"
	"testing"
	"time"

	"taskledger/cmd/taskledger/app/apptest"
)

func hbCall(d *apptest.Device, id, tok, ex, step, key string) *apptest.Resp {
	return d.Call(id, "heartbeat", tok, map[string]any{"claim_generation": 1, "execution_id": ex, "step": step}, key)
}

// hbLease is the lease_expires_at of an answer, in ms.
func hbLease(t *testing.T, r *apptest.Resp) int64 {
	t.Helper()
	ts, err := time.Parse(time.RFC3339Nano, apptest.Str(r.JSON(), "lease_expires_at"))
	if err != nil {
		t.Fatalf("lease_expires_at: %s", r.Body)
	}
	return ts.UnixMilli()
}

// hbLastEvent returns the type and body of the task's newest event.
func hbLastEvent(t *testing.T, n *apptest.Node, id string) (string, map[string]any) {
	t.Helper()
	r := n.Do("GET", ctAdminPath+"/tasks/"+id+"/events", n.AdminToken, nil, nil)
	apptest.Must(t, r, http.StatusOK)
	evs := r.JSON()["events"].([]any)
	last := evs[len(evs)-1].(map[string]any)
	return apptest.Str(last, "type"), last["body"].(map[string]any)
}

// A heartbeat that keeps the step appends no event but extends the running
// lease durably: a restart keeps it, a replay answers the same, a step
// change appends one task.heartbeat, and the completion decided on the
// extended lease records that lease.
func TestQuietHeartbeatExtendsLeaseWithoutEvent(t *testing.T) {
	n := apptest.Start(t)
	d := ctReadyDevice(t, n)
	a := n.CreateTask(nil)
	_, tok, _ := ctClaim(t, d)
	ex := ctStart(t, d, a, tok, 1)

	h := n.Head()
	first := hbCall(d, a, tok, ex, "opening app", "")
	apptest.Must(t, first, http.StatusOK)
	if n.Head() != h+1 {
		t.Fatalf("a step change appended %d events, want 1", n.Head()-h)
	}
	n.Advance(60 * time.Second)
	h = n.Head()
	key := apptest.NewKey()
	quiet := hbCall(d, a, tok, ex, "opening app", key)
	apptest.Must(t, quiet, http.StatusOK)
	if n.Head() != h {
		t.Fatalf("an unchanged step appended %d events", n.Head()-h)
	}
	if got, want := hbLease(t, quiet), hbLease(t, first)+60_000; got != want || apptest.Str(quiet.JSON(), "step") != "opening app" {
		t.Fatalf("quiet heartbeat: lease %d, want %d: %s", got, want, quiet.Body)
	}
	ctReplayed(t, quiet, hbCall(d, a, tok, ex, "opening app", key))
	if n.Head() != h {
		t.Fatalf("a replay appended an event")
	}
	ctErr(t, hbCall(d, a, tok, ex, "other step", key), http.StatusConflict, "idempotency_conflict")

	// The soft lease survives a restart (and the restart's verify agrees).
	if _, err := n.Snapshot(); err != nil {
		t.Fatal(err)
	}
	n = n.Restart()
	d.N = n
	ctReplayed(t, quiet, hbCall(d, a, tok, ex, "opening app", key))

	// Past the lease the chain recorded, inside the one the quiet heartbeat gave.
	n.Advance(89 * time.Second)
	h = n.Head()
	apptest.Must(t, hbCall(d, a, tok, ex, "typing", ""), http.StatusOK)
	if n.Head() != h+1 {
		t.Fatalf("a step change appended %d events, want 1", n.Head()-h)
	}
	if typ, body := hbLastEvent(t, n, a); typ != "task.heartbeat" || apptest.Str(body, "previous_lease_expires_at") != apptest.Str(quiet.JSON(), "lease_expires_at") {
		t.Fatalf("step change event %s %v", typ, body)
	}
	n.Advance(30 * time.Second)
	quiet2 := hbCall(d, a, tok, ex, "typing", "")
	apptest.Must(t, quiet2, http.StatusOK)
	n.Advance(89 * time.Second)
	r := d.Call(a, "complete", tok, map[string]any{"claim_generation": 1, "execution_id": ex, "expected_version": 3, "result": map[string]any{"ok": true}}, "")
	apptest.Must(t, r, http.StatusOK)
	if typ, body := hbLastEvent(t, n, a); typ != "task.completed" || apptest.Str(body, "running_lease_expires_at") != apptest.Str(quiet2.JSON(), "lease_expires_at") {
		t.Fatalf("completion event %s %v, want running lease %d", typ, body, hbLease(t, quiet2))
	}
	n.Restart().Close()
}

// Exactly at the lease a quiet heartbeat gave, the lease is expired: the
// completion becomes a late report that records the lease it was judged
// against, and the operator may recover.
func TestQuietHeartbeatLeaseBoundary(t *testing.T) {
	n := apptest.Start(t)
	d := ctReadyDevice(t, n)
	a := n.CreateTask(nil)
	_, tok, _ := ctClaim(t, d)
	ex := ctStart(t, d, a, tok, 1)
	apptest.Must(t, hbCall(d, a, tok, ex, "s", ""), http.StatusOK)
	n.Advance(30 * time.Second)
	quiet := hbCall(d, a, tok, ex, "s", "")
	apptest.Must(t, quiet, http.StatusOK)

	n.Advance(89 * time.Second) // one second before the quiet lease: still valid
	apptest.Must(t, tkRecover(n, a, "fail", 3), http.StatusConflict, "lease_not_expired")
	n.Advance(time.Second) // exactly at it
	h := n.Head()
	ctRefused(t, n, h, hbCall(d, a, tok, ex, "s", ""), http.StatusConflict, "lease_expired")
	r := d.Call(a, "complete", tok, map[string]any{"claim_generation": 1, "execution_id": ex, "expected_version": 3, "result": map[string]any{}}, "")
	apptest.Must(t, r, http.StatusConflict, "lease_expired")
	if typ, body := hbLastEvent(t, n, a); typ != "task.late_report" || apptest.Str(body, "running_lease_expires_at") != apptest.Str(quiet.JSON(), "lease_expires_at") {
		t.Fatalf("late report %s %v", typ, body)
	}
	apptest.Must(t, tkRecover(n, a, "fail", 3), http.StatusOK)
	if typ, body := hbLastEvent(t, n, a); typ != "task.recovered" || apptest.Str(body, "running_lease_expires_at") != apptest.Str(quiet.JSON(), "lease_expires_at") {
		t.Fatalf("recovery %s %v", typ, body)
	}
	n.Restart().Close()
}
