package projections

import (
	"errors"
	"testing"

	"taskledger/events"
	"taskledger/ledger"
)

// TestLegacySoftRecordOutcome: a soft idempotency record written with an
// HTTP status (before records held an Outcome) loads with the matching
// outcome; one with neither is corrupt, not silently "none".
func TestLegacySoftRecordOutcome(t *testing.T) {
	for status, want := range map[int]Outcome{204: OutcomeNoTask, 200: OutcomeAccepted} {
		raw, err := ledger.Marshal(map[string]any{"scope": "device:d:claim-next", "key": "k", "status": status})
		if err != nil {
			t.Fatal(err)
		}
		var r IdemRecord
		if err := ledger.Unmarshal(raw, &r); err != nil {
			t.Fatal(err)
		}
		if err := legacyOutcome(raw, &r); err != nil || r.Outcome != want {
			t.Errorf("status %d: outcome %s, %v; want %s", status, r.Outcome, err, want)
		}
	}
	raw, _ := ledger.Marshal(map[string]any{"scope": "s", "key": "k"})
	var r IdemRecord
	if err := legacyOutcome(raw, &r); !errors.Is(err, ledger.ErrCorrupt) {
		t.Errorf("record without outcome: %v, want ErrCorrupt", err)
	}
}

// TestOutcomesAreDistinctAndNamed: every outcome has its own name and none
// is the zero value, which means "nothing recorded".
func TestOutcomesAreDistinctAndNamed(t *testing.T) {
	seen := map[string]bool{}
	for _, o := range AllOutcomes() {
		if o == OutcomeNone || o.String() == "none" || seen[o.String()] {
			t.Errorf("outcome %d (%s) is zero, unnamed or a duplicate", o, o)
		}
		seen[o.String()] = true
	}
}

// TestEveryEventTypeHasAnApplier: the fold has a method for every event
// type the codecs know, and nothing else.
func TestEveryEventTypeHasAnApplier(t *testing.T) {
	a := appliers()
	for _, typ := range events.AllEventTypes() {
		if a[typ] == nil {
			t.Errorf("%s has no applier", typ)
		}
	}
	if len(a) != len(events.AllEventTypes()) {
		t.Errorf("%d appliers for %d event types", len(a), len(events.AllEventTypes()))
	}
}
