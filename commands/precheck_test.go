package commands

import (
	"errors"
	"testing"

	"taskledger/projections"
)

// Precheck gives Decide's refusal without deciding, says when a key is
// already recorded, and a call sent as recorded-only never appends.
func TestPrecheckMatchesDecideAndRecordedOnlyNeverAppends(t *testing.T) {
	w := newWorld(t)
	f := w.running()
	ev := func(mod func(c *TaskCall)) *TaskCall {
		c := w.call(f, OpEvidence)
		c.Evidence = &projections.Evidence{SHA256: HashToken("png"), Size: 3, Kind: "screenshot", CapturedAt: w.now}
		if mod != nil {
			mod(c)
		}
		return c
	}
	head := w.s.Head
	cases := map[string]struct {
		mod  func(c *TaskCall)
		want error
	}{
		"held":             {nil, nil},
		"unknown task":     {func(c *TaskCall) { c.TaskID = w.id() }, ErrClaimNotFound},
		"other token":      {func(c *TaskCall) { c.TokenHash = HashToken("x") }, ErrClaimTokenMismatch},
		"other generation": {func(c *TaskCall) { c.Generation++ }, ErrClaimGenerationMismatch},
		"other execution":  {func(c *TaskCall) { c.ExecutionID = w.id() }, ErrExecutionMismatch},
		"revoked device":   {func(c *TaskCall) { c.Device.DeviceID = w.id() }, ErrDeviceRevoked},
	}
	for name, tc := range cases {
		recorded, err := ev(tc.mod).Precheck(w.s, w.now, &w.cfg)
		if recorded || !errors.Is(err, tc.want) && (err != nil || tc.want != nil) {
			t.Errorf("%s: recorded %v, %v; want %v", name, recorded, err, tc.want)
		}
	}
	if w.s.Head.Seq != head.Seq {
		t.Fatal("precheck changed the projections")
	}
	// A new key sent as recorded-only is refused, never decided.
	ro := ev(func(c *TaskCall) { c.RecordedOnly = true })
	if _, err := w.decide(ro); !errors.Is(err, ErrIdempotencyKeyExpired) {
		t.Fatalf("recorded-only new key: %v", err)
	}
	// Accepted once, the key is recorded: Precheck says so, and the
	// recorded-only call replays.
	c := ev(nil)
	w.given(c)
	again := *c
	again.RecordedOnly = true
	if recorded, err := again.Precheck(w.s, w.now, &w.cfg); !recorded || err != nil {
		t.Fatalf("recorded key: %v %v", recorded, err)
	}
	if types, err := w.decide(&again); err != nil || len(types) != 0 {
		t.Fatalf("recorded-only replay: %v %v", types, err)
	}
	// The lease ends: Precheck refuses like Decide.
	w.now += w.cfg.RunningLease.Milliseconds()
	if _, err := ev(nil).Precheck(w.s, w.now, &w.cfg); !errors.Is(err, ErrLeaseExpired) {
		t.Fatalf("expired lease: %v", err)
	}
}
