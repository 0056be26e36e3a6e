package client

import (
	"encoding/json"
	"taskledger/wire"
	"time"
)

// Task states: the wire's (one set for server and client).
const (
	StatePending             = wire.StatePending
	StateClaimed             = wire.StateClaimed
	StateRunning             = wire.StateRunning
	StateWaitingConfirmation = wire.StateWaitingConfirmation
	StateSucceeded           = wire.StateSucceeded
	StateFailed              = wire.StateFailed
	StateCanceled            = wire.StateCanceled
)

// AllStates lists every task state.
func AllStates() []wire.State { return wire.AllStates() }

// Op names a task-scoped device call; the value is the route suffix.
type Op string

// Task-scoped operations.
const (
	// OpRenew extends the claim lease (CAS).
	OpRenew Op = "lease/renew"
	// OpRelease gives an unstarted claim back.
	OpRelease Op = "release"
	// OpStart moves CLAIMED to RUNNING and creates the execution.
	OpStart Op = "start"
	// OpHeartbeat renews the running lease.
	OpHeartbeat Op = "heartbeat"
	// OpAwaitConfirmation moves RUNNING to WAITING_CONFIRMATION.
	OpAwaitConfirmation Op = "await-confirmation"
	// OpResume moves WAITING_CONFIRMATION back to RUNNING.
	OpResume Op = "resume"
	// OpComplete ends the execution as SUCCEEDED.
	OpComplete Op = "complete"
	// OpFail ends the execution as FAILED.
	OpFail Op = "fail"
	// OpCancelAck acknowledges a cancel request: CANCELED.
	OpCancelAck Op = "cancel-ack"
)

// AllOps lists every task-scoped operation.
func AllOps() []Op {
	return []Op{OpRenew, OpRelease, OpStart, OpHeartbeat, OpAwaitConfirmation, OpResume, OpComplete, OpFail, OpCancelAck}
}

// resultStates are the states a successful answer of each op may show.
var resultStates = map[Op][]wire.State{
	OpRenew:             {StateClaimed},
	OpRelease:           {StatePending},
	OpStart:             {StateRunning},
	OpHeartbeat:         {StateRunning, StateWaitingConfirmation},
	OpAwaitConfirmation: {StateWaitingConfirmation},
	OpResume:            {StateRunning},
	OpComplete:          {StateSucceeded},
	OpFail:              {StateFailed},
	OpCancelAck:         {StateCanceled},
}

// Presence is the body of the presence heartbeat.
type Presence struct {
	AppVersion       string
	OSVersion        string
	TargetAppVersion string
	Checks           map[string]bool
	// ActiveTaskID is sent as null when empty.
	ActiveTaskID string
	// ClientTime is omitted when zero.
	ClientTime time.Time
}

// PresenceResult is a validated presence answer.
type PresenceResult struct {
	ServerTime         time.Time
	Claimable          bool
	MissingChecks      []string
	PresenceExpiresAt  time.Time
	ActiveTaskID       string
	ActiveTaskMismatch bool
}

// ClaimCall is one claim-next request.
type ClaimCall struct {
	// Key is the Idempotency-Key (persisted before sending).
	Key string
	// SessionID is this device process's session (persisted).
	SessionID string
	// ClaimToken is a client-issued token, or empty to ask the server for
	// one.
	ClaimToken string
}

// Claim is a validated successful claim.
type Claim struct {
	TaskID                 string          `json:"task_id"`
	Payload                json.RawMessage `json:"payload"`
	Revision               int64           `json:"revision"`
	CreatedAt              time.Time       `json:"created_at"`
	ReferenceImageURL      string          `json:"reference_image_url,omitempty"`
	Generation             int64           `json:"generation"`
	SessionID              string          `json:"session_id"`
	LeaseExpiresAt         time.Time       `json:"lease_expires_at"`
	AuthorizationExpiresAt time.Time       `json:"authorization_expires_at"`
	// Takeover is the authorization's policy for a claim lost before start:
	// "reclaim" or "manual" ("" from a server that does not say).
	Takeover   string     `json:"takeover,omitempty"`
	State      wire.State `json:"state"`
	Version    int64      `json:"version"`
	ServerTime time.Time  `json:"server_time"`
	// ServerToken is the server-issued claim token, when the call sent
	// none. Never serialized.
	ServerToken string `json:"-"`
}

// ClaimResult is the outcome of claim-next: a claim, or no task.
type ClaimResult struct {
	// Claim is set on 200.
	Claim *Claim
	// NoTask is set on a definitive 204.
	NoTask bool
	// RetryAfter is the server's wait hint (204).
	RetryAfter time.Duration
	// Replayed is set when the server answered from its idempotency record.
	Replayed bool
}

// TaskCall is one task-scoped request; Body is the exact JSON sent (build
// it with the *Body helpers and persist it before sending).
type TaskCall struct {
	Op         Op
	TaskID     string
	Key        string
	ClaimToken string
	Generation int64
	// ExecutionID is what the answer must name (empty: none expected yet).
	ExecutionID string
	// Step is what a heartbeat answer must echo.
	Step string
	Body []byte
}

// TaskResult is a validated answer of a task-scoped call.
type TaskResult struct {
	TaskID          string
	State           wire.State
	Version         int64
	ClaimGeneration int64
	ExecutionID     string
	ServerTime      time.Time
	// LeaseExpiresAt is zero when the answer carries null (ended claims).
	LeaseExpiresAt  time.Time
	CancelRequested bool
	Step            string
	Replayed        bool
}

// EvidenceCall is one evidence upload.
type EvidenceCall struct {
	TaskID      string
	Key         string
	ClaimToken  string
	Generation  int64
	ExecutionID string
	CapturedAt  time.Time
	PNG         []byte
	// SHA256 (hex) and Size are what the answer must confirm.
	SHA256 string
	Size   int64
}

// EvidenceResult is a validated evidence answer.
type EvidenceResult struct {
	EvidenceID string
	SHA256     string
	Size       int64
	Kind       string
	CapturedAt time.Time
	Replayed   bool
}
