package projections

// Outcome is what an idempotent request came to, in the domain's words;
// api/ maps it to an HTTP status in one table (outcomeStatus). The numbers
// are written into snapshots: append new outcomes, never reorder or reuse.
type Outcome uint8

const (
	// OutcomeNone is the zero value: no outcome recorded (never stored).
	OutcomeNone Outcome = iota
	// OutcomeAccepted: the command changed an existing task or device.
	OutcomeAccepted
	// OutcomeCreated: the command created a task, a device or evidence.
	OutcomeCreated
	// OutcomeNoTask: a claim-next found nothing to claim.
	OutcomeNoTask
	// OutcomeRefused: the command was refused with the record's Code
	// (lease_expired, claim_requires_manual).
	OutcomeRefused
)

// AllOutcomes lists every outcome a record can hold.
func AllOutcomes() []Outcome {
	return []Outcome{OutcomeAccepted, OutcomeCreated, OutcomeNoTask, OutcomeRefused}
}

// String names the outcome (logs and test failures).
func (o Outcome) String() string {
	switch o {
	case OutcomeAccepted:
		return "accepted"
	case OutcomeCreated:
		return "created"
	case OutcomeNoTask:
		return "no_task"
	case OutcomeRefused:
		return "refused"
	}
	return "none"
}
