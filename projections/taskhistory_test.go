package projections_test

import (
	"strings"
	"testing"

	"taskledger/events"
	"taskledger/ledger"
	"taskledger/node/nodetest"
	"taskledger/projections"
)

// succeededHistory runs one task to SUCCEEDED (claim, start, a step, two
// quiet heartbeats, complete) and returns its stream's events.
func succeededHistory(t *testing.T) []ledger.Event {
	t.Helper()
	n := nodetest.Start(t)
	run := n.StartTask(t, n.RegisterDevice(), map[string]any{"job": "rules"})
	id := run.TaskID
	for range 3 {
		nodetest.Must(t, run.Beat("typing"), 200)
	}
	nodetest.Must(t, run.Complete(map[string]any{"ok": true}), 200)
	n.Close()
	store, err := ledger.Open(n.Dir, ledger.Options{ReadOnly: true})
	if err != nil {
		t.Fatal(err)
	}
	defer store.Close()
	var evs []ledger.Event
	if err := store.Stream(events.TaskStream(id), func(e *ledger.Event) error { evs = append(evs, *e); return nil }); err != nil {
		t.Fatal(err)
	}
	return evs
}

// edit decodes the body of evs[i], changes it and encodes it back.
func edit[B any](t *testing.T, evs []ledger.Event, i int, change func(b *B)) []ledger.Event {
	t.Helper()
	out := append([]ledger.Event(nil), evs...)
	body, err := events.DecodeBody(out[i].Type, out[i].Schema, out[i].Body)
	if err != nil {
		t.Fatal(err)
	}
	b, ok := body.(*B)
	if !ok {
		t.Fatalf("event %d is %T", i, body)
	}
	change(b)
	if out[i].Body, err = ledger.Marshal(b); err != nil {
		t.Fatal(err)
	}
	return out
}

func find(t *testing.T, evs []ledger.Event, typ events.Type) int {
	t.Helper()
	for i := range evs {
		if evs[i].Type == typ {
			return i
		}
	}
	t.Fatalf("no %s in the history", typ)
	return -1
}

// A task's own events are checked for the rules an auditor can check from
// them alone; each broken history is refused with the rule it breaks.
func TestTaskHistoryRules(t *testing.T) {
	evs := succeededHistory(t)
	if err := projections.CheckTaskHistory(evs); err != nil {
		t.Fatalf("the real history: %v", err)
	}
	done := find(t, evs, events.EvTaskCompleted)
	started := find(t, evs, events.EvTaskStarted)
	claimed := find(t, evs, events.EvTaskClaimed)
	withStartAgain := append(append([]ledger.Event(nil), evs[:done]...), evs[started])
	for _, tc := range []struct {
		name string
		evs  []ledger.Event
		want string
	}{
		{"completed after the lease it records", func() []ledger.Event {
			out := append([]ledger.Event(nil), evs...)
			out[done].At = 1 << 50
			return out
		}(), "running lease that ended"},
		{"judged against a lease shorter than the chain's", edit(t, evs, done, func(b *events.TaskCompleted) { b.LeaseExpiresAt = 1 }), "shorter than the running lease"},
		{"a second start while running", withStartAgain, "not allowed in RUNNING"},
		{"an event after the end", append(append([]ledger.Event(nil), evs...), evs[done]), "after the task ended"},
		{"a version that skips", edit(t, evs, done, func(b *events.TaskCompleted) { b.Version += 2 }), "steps the version by one"},
		{"no task.created", evs[1:], "does not start with task.created"},
		{"started after the claim lease", func() []ledger.Event {
			out := edit(t, evs, claimed, func(b *events.TaskClaimed) { b.LeaseExpiresAt = evs[started].At })
			return out
		}(), "after the claim lease ended"},
		{"a claim under another authorization", edit(t, evs, claimed, func(b *events.TaskClaimed) { b.AuthorizationID = "x" }), "not the task's active"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := projections.CheckTaskHistory(tc.evs)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("got %v, want an error naming %q", err, tc.want)
			}
		})
	}
}
