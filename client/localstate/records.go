package localstate

import (
	"encoding/json"
	"taskledger/wire"
	"time"
)

// FormatVersion is the state file format.
const FormatVersion = "1"

// Identity is who this device is and where its server is.
type Identity struct {
	ServerURL string `json:"server_url"`
	DeviceID  string `json:"device_id"`
	// KeySource is the secretstore kind; KeyFile its path (key files),
	// KeyID the key's name in the OS keychain (keychain).
	KeySource string `json:"key_source"`
	KeyFile   string `json:"key_file,omitempty"`
	KeyID     string `json:"key_id,omitempty"`
	// SealedToken is the sealed device token.
	SealedToken []byte    `json:"sealed_token"`
	EnrolledAt  time.Time `json:"enrolled_at"`
}

// Kinds of pending requests.
const (
	// PendingClaim is a claim-next.
	PendingClaim = "claim"
	// PendingTask is a task-scoped call.
	PendingTask = "task"
	// PendingEvidence is an evidence upload.
	PendingEvidence = "evidence"
)

// Pending is the request persisted before it is sent; it is replayed with
// the same key and body until a definitive answer arrives.
type Pending struct {
	Kind        string          `json:"kind"`
	Op          string          `json:"op,omitempty"`
	Key         string          `json:"key"`
	TaskID      string          `json:"task_id,omitempty"`
	Generation  int64           `json:"generation,omitempty"`
	ExecutionID string          `json:"execution_id,omitempty"`
	Step        string          `json:"step,omitempty"`
	Body        json.RawMessage `json:"body,omitempty"`
	// SealedClaimToken is the client-issued claim token of a claim.
	SealedClaimToken []byte `json:"sealed_claim_token,omitempty"`
	// Evidence: the file named by the caller, its digest and size.
	Path       string    `json:"path,omitempty"`
	SHA256     string    `json:"sha256,omitempty"`
	Size       int64     `json:"size,omitempty"`
	CapturedAt time.Time `json:"captured_at,omitzero"`
	CreatedAt  time.Time `json:"created_at"`
}

// Token origins.
const (
	OriginClient = "client"
	OriginServer = "server"
)

// Active is the claim this device holds, with the snapshot of the last
// answer about it.
type Active struct {
	TaskID                 string          `json:"task_id"`
	SessionID              string          `json:"session_id"`
	ClaimKey               string          `json:"claim_key"`
	Generation             int64           `json:"generation"`
	TokenOrigin            string          `json:"token_origin"`
	SealedToken            []byte          `json:"sealed_token"`
	Payload                json.RawMessage `json:"payload"`
	Revision               int64           `json:"revision"`
	CreatedAt              time.Time       `json:"created_at"`
	ReferenceImageURL      string          `json:"reference_image_url,omitempty"`
	State                  wire.State      `json:"state"`
	Version                int64           `json:"version"`
	ServerTime             time.Time       `json:"server_time"`
	LeaseExpiresAt         time.Time       `json:"lease_expires_at"`
	AuthorizationExpiresAt time.Time       `json:"authorization_expires_at"`
	// Takeover is the claim's takeover policy ("manual": a claim lost
	// before start needs a person).
	Takeover        string `json:"takeover,omitempty"`
	ExecutionID     string `json:"execution_id,omitempty"`
	CancelRequested bool   `json:"cancel_requested,omitempty"`
	// Launched is set (and committed) before the work starts; a launched
	// task whose end was never reported needs a person after a restart.
	Launched bool `json:"launched,omitempty"`
	// WorkPID and WorkStartTime identify the work command (its start time
	// in clock ticks after boot, Linux; 0 where the system does not tell).
	// They are committed before the command is let run, so the next start
	// can kill a command that outlived its agent — only when both match.
	WorkPID       int    `json:"work_pid,omitempty"`
	WorkStartTime uint64 `json:"work_start_time,omitempty"`
}

// Manual is a task (or a claim key, when the task is unknown) that needs a
// person.
type Manual struct {
	ID          string    `json:"id"`
	TaskID      string    `json:"task_id,omitempty"`
	Generation  int64     `json:"generation,omitempty"`
	ExecutionID string    `json:"execution_id,omitempty"`
	Code        string    `json:"code,omitempty"`
	Reason      string    `json:"reason"`
	Since       time.Time `json:"since"`
}

// State is everything in the file, read in one transaction.
type State struct {
	Identity  *Identity
	SessionID string
	Pending   *Pending
	Active    *Active
	Manual    []Manual
}

// Busy reports whether anything pending, active or manual exists.
func (s *State) Busy() bool {
	return s.Pending != nil || s.Active != nil || len(s.Manual) > 0
}
