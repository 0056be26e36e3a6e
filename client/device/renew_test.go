package device

import (
	"errors"
	"net/http"
	"testing"

	"taskledger/client"
	"taskledger/client/internal/faultproxy"
)

// The server commits a renew but its answer is lost: the persisted call is
// replayed with the same key and token, the server holds one
// task.claim_renewed, and the local lease is the renewed one.
func TestRenewLostAnswerReplaysSameKey(t *testing.T) {
	r := newRig(t, rule{"/lease/renew", 0, faultproxy.Drop})
	task := r.srv.NewTask(t, map[string]any{"n": 1})
	out, err := r.dev.Claim(ctx)
	if err != nil || out.Active.TaskID != task {
		t.Fatalf("claim: %+v %v", out, err)
	}
	before := r.dev.State().Active.LeaseExpiresAt
	r.srv.Advance(t, 60)
	_, err = r.dev.Renew(ctx)
	mustUnknown(t, err)
	if p := r.dev.State().Pending; p == nil || p.Op != string(client.OpRenew) {
		t.Fatalf("the renew is not kept for replay: %+v", r.dev.State())
	}
	// Reopen, as after a crash: the persisted renew survives.
	r.dev.Close()
	r.open(t)
	res, err := r.dev.Renew(ctx)
	if err != nil || !res.Replayed {
		t.Fatalf("replayed renew: %+v %v", res, err)
	}
	sameKey(t, r.seen("/lease/renew"), 2)
	if n := r.srv.Count(t, "task.claim_renewed", task); n != 1 {
		t.Fatalf("server has %d task.claim_renewed, want 1", n)
	}
	a := r.dev.State().Active
	if a == nil || !a.LeaseExpiresAt.After(before) || r.dev.State().Pending != nil {
		t.Fatalf("after the replay: %+v (lease before %v)", r.dev.State(), before)
	}
	finish(t, r)
}

// A renew sent at the claim lease expiry is refused and never revives
// the claim: the device drops it (nothing ran), and the server records no
// renew.
func TestRenewAfterExpiryNeverRevives(t *testing.T) {
	r := newRig(t)
	task := r.srv.NewTask(t, map[string]any{"n": 1})
	if _, err := r.dev.Claim(ctx); err != nil {
		t.Fatal(err)
	}
	r.srv.Advance(t, 600) // the default claim lease
	_, err := r.dev.Renew(ctx)
	if !errors.Is(err, ErrClaimLost) {
		t.Fatalf("renew after expiry: %v, want ErrClaimLost", err)
	}
	if n := r.srv.Count(t, "task.claim_renewed", task); n != 0 {
		t.Fatalf("server recorded %d renews of an expired claim", n)
	}
	if st := r.dev.State(); st.Active != nil || st.Pending != nil {
		t.Fatalf("the expired claim is still held locally: %+v", st)
	}
	if _, err := r.dev.Renew(ctx); !errors.Is(err, ErrNoActiveClaim) {
		t.Fatalf("a second renew: %v, want ErrNoActiveClaim", err)
	}
	code, _ := r.srv.Do(t, http.MethodGet, "/admin/tasks/"+task, nil)
	if code != http.StatusOK || r.srv.Task(t, task)["state"] != "CLAIMED" {
		t.Fatalf("task %v", r.srv.Task(t, task))
	}
}

// A renew whose answer was lost, replayed after the claim ended on the
// server (an operator canceled the task), is answered claim_replay_expired:
// the device drops the claim and the server still holds one renew and a
// CANCELED task.
func TestRenewReplayAfterClaimEnded(t *testing.T) {
	r := newRig(t, rule{"/lease/renew", 0, faultproxy.Drop})
	task := r.srv.NewTask(t, map[string]any{"n": 1})
	if _, err := r.dev.Claim(ctx); err != nil {
		t.Fatal(err)
	}
	r.srv.Advance(t, 60)
	_, err := r.dev.Renew(ctx)
	mustUnknown(t, err)
	r.srv.MustDo(t, http.MethodPost, "/admin/tasks/"+task+"/cancel", map[string]any{"reason": "not needed"})
	_, err = r.dev.Renew(ctx)
	if !errors.Is(err, ErrClaimLost) {
		t.Fatalf("replay after the claim ended: %v, want ErrClaimLost", err)
	}
	sameKey(t, r.seen("/lease/renew"), 2)
	if n := r.srv.Count(t, "task.claim_renewed", task); n != 1 {
		t.Fatalf("server has %d task.claim_renewed, want 1", n)
	}
	if st := r.srv.Task(t, task)["state"]; st != "CANCELED" {
		t.Fatalf("task state %v", st)
	}
	if st := r.dev.State(); st.Active != nil || st.Pending != nil {
		t.Fatalf("the ended claim is still held locally: %+v", st)
	}
}
