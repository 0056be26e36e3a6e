package api

import (
	"net/http"
	"testing"

	"taskledger/projections"
)

// TestOutcomeStatusCoversEveryOutcome walks the one table from domain
// outcomes to HTTP statuses: every outcome has its status, and an outcome
// outside the table is a server fault, never a success.
func TestOutcomeStatusCoversEveryOutcome(t *testing.T) {
	want := map[projections.Outcome]int{
		projections.OutcomeAccepted: http.StatusOK,
		projections.OutcomeCreated:  http.StatusCreated,
		projections.OutcomeNoTask:   http.StatusNoContent,
		projections.OutcomeRefused:  http.StatusConflict,
	}
	for _, o := range projections.AllOutcomes() {
		if got := outcomeStatus(o); got != want[o] || want[o] == 0 {
			t.Errorf("outcome %s: status %d, want %d", o, got, want[o])
		}
	}
	if len(outcomeStatuses) != len(projections.AllOutcomes()) {
		t.Errorf("table has %d entries, %d outcomes", len(outcomeStatuses), len(projections.AllOutcomes()))
	}
	if got := outcomeStatus(projections.OutcomeNone); got != http.StatusInternalServerError {
		t.Errorf("unrecorded outcome: status %d, want 500", got)
	}
}
