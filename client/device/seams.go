package device

import (
	"context"
	"encoding/json"
	"time"

	"taskledger/client"
	"taskledger/client/localstate"
)

// TaskSource is where an agent gets its work and reports on it. *Device
// is the implementation over HTTP with the crash-safe local state; an
// embedder (or a test) may supply another — the agent's loop
// (agent.Run) sees only this interface.
//
// The contract the agent relies on: State returns a copy of the current
// local state (Active is the held claim, Pending a request of unknown
// outcome, Manual the tasks that need a person); every task call acts on
// the held claim and returns client.ErrUnknownOutcome when its outcome is
// not known (the agent repeats it until definitive), a *NeedsPersonError
// when a person must act, and ErrClaimLost when an unstarted claim ended
// on the server; a call that ends the task clears Active.
type TaskSource interface {
	// State is a copy of the local state (sealed values only).
	State() localstate.State
	// CheckManual returns a *NeedsPersonError while a task needs a person.
	CheckManual() error
	// ReplayPending settles a pending task call or evidence upload.
	ReplayPending(ctx context.Context) error
	// Presence sends the presence heartbeat.
	Presence(ctx context.Context, p client.Presence) (client.PresenceResult, error)
	// Claim asks for work (or replays the pending claim).
	Claim(ctx context.Context) (ClaimOutcome, error)
	// Start, Heartbeat, Renew, Complete, Fail and CancelAck are the task
	// calls on the held claim.
	Start(ctx context.Context) (client.TaskResult, error)
	Heartbeat(ctx context.Context, step string) (client.TaskResult, error)
	Renew(ctx context.Context) (client.TaskResult, error)
	Complete(ctx context.Context, result json.RawMessage) (client.TaskResult, error)
	Fail(ctx context.Context, reasonCode, detail string) (client.TaskResult, error)
	CancelAck(ctx context.Context) (client.TaskResult, error)
	// MarkLaunched commits that the work is about to start (a launched
	// task is never run again after a crash); RecordWork commits the work
	// command's pid and start time before it is let run.
	MarkLaunched() error
	RecordWork(pid int, startTime uint64) error
	// MarkNeedsPerson records the held task for a person, drops it, and
	// returns the *NeedsPersonError to report.
	MarkNeedsPerson(code, reason string) error
}

// EvidenceSink takes the evidence (a PNG the caller names) of the running
// execution. *Device uploads it; an embedder may keep it elsewhere.
type EvidenceSink interface {
	UploadEvidence(ctx context.Context, path string, capturedAt time.Time) (client.EvidenceResult, error)
}

var (
	_ TaskSource   = (*Device)(nil)
	_ EvidenceSink = (*Device)(nil)
)

// Presence sends the presence heartbeat p.
func (d *Device) Presence(ctx context.Context, p client.Presence) (client.PresenceResult, error) {
	return d.c.Heartbeat(ctx, p)
}
