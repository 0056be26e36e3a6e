package device

import (
	"context"
	"errors"
	"testing"

	"taskledger/client"
	"taskledger/client/internal/faultproxy"
)

var ctx = context.Background()

func mustUnknown(t *testing.T, err error) {
	t.Helper()
	if !errors.Is(err, client.ErrUnknownOutcome) {
		t.Fatalf("want an unknown outcome, got %v", err)
	}
}

// sameKey checks that every request seen used one key and one claim token.
func sameKey(t *testing.T, seen []faultproxy.Seen, n int) {
	t.Helper()
	if len(seen) != n {
		t.Fatalf("saw %d requests, want %d", len(seen), n)
	}
	for _, s := range seen[1:] {
		if s.Key != seen[0].Key || s.ClaimToken != seen[0].ClaimToken {
			t.Fatalf("key or token changed between replays: %+v", seen)
		}
	}
}

// finish runs start, heartbeat and complete on the active claim.
func finish(t *testing.T, r *rig) {
	t.Helper()
	if _, err := r.dev.Start(ctx); err != nil {
		t.Fatal(err)
	}
	if _, err := r.dev.Heartbeat(ctx, "working"); err != nil {
		t.Fatal(err)
	}
	res, err := r.dev.Complete(ctx, []byte(`{"ok":true}`))
	if err != nil || res.State != client.StateSucceeded {
		t.Fatalf("%+v %v", res, err)
	}
}

// (a) The server commits the claim but the answer is dropped: the client
// replays the persisted key and gets the same task and generation.
func TestProxyDroppedClaimAnswer(t *testing.T) {
	r := newRig(t, rule{"/claim-next", 0, faultproxy.Drop})
	task := r.srv.NewTask(t, map[string]any{"n": 1})
	_, err := r.dev.Claim(ctx)
	mustUnknown(t, err)
	st := r.dev.State()
	if st.Pending == nil || st.Pending.Kind != "claim" || st.Active != nil {
		t.Fatalf("after a dropped answer: %+v", st)
	}
	if n := r.srv.Count(t, "task.claimed", task); n != 1 {
		t.Fatalf("server committed %d claims", n)
	}
	// Reopen, as after a crash: the persisted key survives.
	r.dev.Close()
	r.open(t)
	out, err := r.dev.Claim(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if out.Active.TaskID != task || out.Active.Generation != 1 || !out.Replayed {
		t.Fatalf("recovered %+v", out)
	}
	sameKey(t, r.claims(), 2)
	if r.claims()[0].Key != st.Pending.Key {
		t.Fatal("replayed key differs from the persisted key")
	}
	if n := r.srv.Count(t, "task.claimed", task); n != 1 {
		t.Fatalf("server has %d claims", n)
	}
	finish(t, r)
	// With the claim active no new claim is sent.
	before := len(r.claims())
	if _, err := r.dev.Claim(ctx); err != nil {
		t.Fatal(err)
	}
	if len(r.claims()) != before+1 {
		t.Fatal("expected one new claim-next after the task ended")
	}
}

// (b) Truncated and schema-drifted 2xx bodies are unknown outcomes,
// replayed with the same key, never a success.
func TestProxyTruncatedAndDrifted(t *testing.T) {
	r := newRig(t,
		rule{"/claim-next", 0, faultproxy.Truncate}, rule{"/claim-next", 1, faultproxy.Drift},
		rule{"/start", 0, faultproxy.Drift}, rule{"/start", 1, faultproxy.Truncate},
		rule{"/complete", 0, faultproxy.Truncate}, rule{"/complete", 1, faultproxy.Drift})
	task := r.srv.NewTask(t, map[string]any{"n": 2})
	for i := 0; i < 2; i++ {
		_, err := r.dev.Claim(ctx)
		mustUnknown(t, err)
		if r.dev.State().Active != nil {
			t.Fatal("an invalid answer was taken as a claim")
		}
	}
	out, err := r.dev.Claim(ctx)
	if err != nil || out.Active.TaskID != task || out.Active.Generation != 1 {
		t.Fatalf("%+v %v", out, err)
	}
	sameKey(t, r.claims(), 3)
	for i := 0; i < 2; i++ {
		_, err := r.dev.Start(ctx)
		mustUnknown(t, err)
		if a := r.dev.State().Active; a.State != client.StateClaimed || a.ExecutionID != "" {
			t.Fatalf("an invalid start answer was stored: %+v", a)
		}
	}
	res, err := r.dev.Start(ctx)
	if err != nil || res.State != client.StateRunning {
		t.Fatalf("%+v %v", res, err)
	}
	sameKey(t, r.seen("/start"), 3)
	if n := r.srv.Count(t, "task.started", task); n != 1 {
		t.Fatalf("%d starts", n)
	}
	for i := 0; i < 2; i++ {
		_, err := r.dev.Complete(ctx, []byte(`{"v":1}`))
		mustUnknown(t, err)
		if r.dev.State().Active == nil {
			t.Fatal("an invalid complete answer ended the claim")
		}
	}
	res, err = r.dev.Complete(ctx, []byte(`{"v":1}`))
	if err != nil || res.State != client.StateSucceeded || r.dev.State().Active != nil {
		t.Fatalf("%+v %v", res, err)
	}
	sameKey(t, r.seen("/complete"), 3)
	if n := r.srv.Count(t, "task.completed", task); n != 1 {
		t.Fatalf("%d completions", n)
	}
}

// (c) 503 and timeouts: the same key is replayed.
func TestProxyUnavailableAndTimeout(t *testing.T) {
	r := newRig(t,
		rule{"/claim-next", 0, faultproxy.Unavailable}, rule{"/claim-next", 1, faultproxy.Stall},
		rule{"/heartbeat", 1, faultproxy.Stall}, rule{"/heartbeat", 2, faultproxy.Unavailable})
	task := r.srv.NewTask(t, map[string]any{"n": 3})
	_, err := r.dev.Claim(ctx)
	var u *client.UnknownOutcomeError
	if !errors.As(err, &u) || u.Status != 503 || u.RetryAfter == 0 {
		t.Fatalf("503: %v", err)
	}
	_, err = r.dev.Claim(ctx) // the server commits, the answer never comes
	mustUnknown(t, err)
	out, err := r.dev.Claim(ctx)
	if err != nil || out.Active.TaskID != task || out.Active.Generation != 1 {
		t.Fatalf("%+v %v", out, err)
	}
	sameKey(t, r.claims(), 3)
	if n := r.srv.Count(t, "task.claimed", task); n != 1 {
		t.Fatalf("%d claims", n)
	}
	if _, err := r.dev.Start(ctx); err != nil {
		t.Fatal(err)
	}
	// Presence heartbeat is request 0 of "/heartbeat"; the task heartbeats
	// follow: a stall, a 503, then the same key gets through.
	for i := 0; i < 2; i++ {
		_, err := r.dev.Heartbeat(ctx, "working")
		mustUnknown(t, err)
	}
	if _, err := r.dev.Heartbeat(ctx, "working"); err != nil {
		t.Fatal(err)
	}
	hb := r.seen("/tasks/" + task + "/heartbeat")
	sameKey(t, hb, 3)
	if n := r.srv.Count(t, "task.heartbeat", task); n != 1 {
		t.Fatalf("%d heartbeats", n)
	}
}

// (d) A definitive 204 lets the next claim use a new key.
func TestProxyNoTaskGivesNewKey(t *testing.T) {
	r := newRig(t)
	for i := 0; i < 2; i++ {
		out, err := r.dev.Claim(ctx)
		if err != nil || !out.NoTask {
			t.Fatalf("%+v %v", out, err)
		}
		if r.dev.State().Pending != nil {
			t.Fatal("a 204 left the key pending")
		}
	}
	task := r.srv.NewTask(t, map[string]any{"n": 4})
	out, err := r.dev.Claim(ctx)
	if err != nil || out.Active == nil || out.Active.TaskID != task {
		t.Fatalf("%+v %v", out, err)
	}
	c := r.claims()
	if len(c) != 3 || c[0].Key == c[1].Key || c[1].Key == c[2].Key || c[0].Key == c[2].Key || c[0].ClaimToken == c[1].ClaimToken {
		t.Fatalf("keys after 204 not renewed: %+v", c)
	}
}
