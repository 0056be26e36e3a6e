package events

import "taskledger/ledger"

// Type is the name of an event type (lowercase and dotted), the type of the
// envelope's ledger.Event.Type field.
type Type = ledger.EventType

// Event types. Lowercase and dotted; new ones may be added, none renamed.
const (
	// EvTaskCreated: an operator created a task (optionally authorized).
	EvTaskCreated Type = "task.created"
	// EvTaskAmended: an operator replaced the payload (revision +1).
	EvTaskAmended Type = "task.amended"
	// EvTaskReferenceImageSet: an operator set the reference image (revision +1).
	EvTaskReferenceImageSet Type = "task.reference_image_set"
	// EvTaskAuthorized: an operator authorized the current revision.
	EvTaskAuthorized Type = "task.authorized"
	// EvTaskAuthorizationRevoked: an operator revoked the authorization.
	EvTaskAuthorizationRevoked Type = "task.authorization_revoked"
	// EvTaskClaimed: a device claimed the task (generation +1).
	EvTaskClaimed Type = "task.claimed"
	// EvTaskClaimResumed: the same session asked again and got its claim back.
	EvTaskClaimResumed Type = "task.claim_resumed"
	// EvTaskClaimRenewed: the claim lease was extended by compare-and-set.
	EvTaskClaimRenewed Type = "task.claim_renewed"
	// EvTaskReleased: the device gave the claim back.
	EvTaskReleased Type = "task.released"
	// EvTaskStarted: the device started executing; consumes the authorization.
	EvTaskStarted Type = "task.started"
	// EvTaskHeartbeat: the running lease was extended.
	EvTaskHeartbeat Type = "task.heartbeat"
	// EvTaskAwaitingConfirmation: the execution paused for confirmation.
	EvTaskAwaitingConfirmation Type = "task.awaiting_confirmation"
	// EvTaskResumed: the execution continued after confirmation.
	EvTaskResumed Type = "task.resumed"
	// EvTaskCompleted: the execution succeeded with a result.
	EvTaskCompleted Type = "task.completed"
	// EvTaskFailed: the execution failed with a reason code.
	EvTaskFailed Type = "task.failed"
	// EvTaskLateReport: a complete/fail that arrived after the running lease expired.
	EvTaskLateReport Type = "task.late_report"
	// EvTaskCancelRequested: an operator asked a running task to stop.
	EvTaskCancelRequested Type = "task.cancel_requested"
	// EvTaskCanceled: the task was canceled (operator, or device cancel-ack).
	EvTaskCanceled Type = "task.canceled"
	// EvTaskRecovered: an operator recovered a task (fail or requeue).
	EvTaskRecovered Type = "task.recovered"
	// EvTaskEvidenceAttached: a device uploaded evidence to its execution.
	EvTaskEvidenceAttached Type = "task.evidence_attached"
	// EvDeviceRegistered: an operator registered a device.
	EvDeviceRegistered Type = "device.registered"
	// EvDeviceRevoked: an operator revoked a device.
	EvDeviceRevoked Type = "device.revoked"
	// EvDeviceClaimRequiresManual: a claim-next the device's open task blocked.
	EvDeviceClaimRequiresManual Type = "device.claim_requires_manual"
	// EvAdminTokenCreated: an operator created an admin token (its hash).
	EvAdminTokenCreated Type = "admin_token.created"
	// EvAdminTokenRevoked: an operator revoked an admin token.
	EvAdminTokenRevoked Type = "admin_token.revoked"
)

// AllEventTypes lists every event type.
func AllEventTypes() []Type {
	return []Type{
		EvTaskCreated, EvTaskAmended, EvTaskReferenceImageSet, EvTaskAuthorized,
		EvTaskAuthorizationRevoked, EvTaskClaimed, EvTaskClaimResumed,
		EvTaskClaimRenewed, EvTaskReleased, EvTaskStarted, EvTaskHeartbeat,
		EvTaskAwaitingConfirmation, EvTaskResumed, EvTaskCompleted, EvTaskFailed,
		EvTaskLateReport, EvTaskCancelRequested, EvTaskCanceled, EvTaskRecovered,
		EvTaskEvidenceAttached, EvDeviceRegistered, EvDeviceRevoked,
		EvDeviceClaimRequiresManual, EvAdminTokenCreated, EvAdminTokenRevoked,
	}
}

// TaskStream is the stream name of a task.
func TaskStream(id string) string { return "task/" + id }

// DeviceStream is the stream name of a device.
func DeviceStream(id string) string { return "device/" + id }

// AdminTokenStream is the stream name of an admin token's name: a name
// revoked and created again continues its stream.
func AdminTokenStream(name string) string { return "admin-token/" + name }

// AuthBody is an authorization snapshot as carried by events.
type AuthBody struct {
	ID            string `msgpack:"authorization_id" json:"authorization_id"`
	Revision      uint64 `msgpack:"revision" json:"revision"`
	PayloadSHA256 string `msgpack:"payload_sha256" json:"payload_sha256"`
	ImageSHA256   string `msgpack:"image_sha256" json:"image_sha256"`
	ExpiresAt     int64  `msgpack:"expires_at" json:"expires_at"`
}

// ClosedClaim names a stale claim that an operator command closed.
type ClosedClaim struct {
	DeviceID   string `msgpack:"device_id" json:"device_id"`
	Generation uint64 `msgpack:"claim_generation" json:"claim_generation"`
}

// TaskCreated is the body of task.created.
type TaskCreated struct {
	TaskID        string    `msgpack:"task_id" json:"task_id"`
	Payload       string    `msgpack:"payload" json:"payload"` // canonical JSON (RFC 8785)
	PayloadSHA256 string    `msgpack:"payload_sha256" json:"payload_sha256"`
	Authorization *AuthBody `msgpack:"authorization" json:"authorization"`
	// Takeover is the takeover policy of Authorization (schema 2; ""
	// without an authorization, and in schema 1, where it reads as
	// "reclaim"), as decided: the server's default when the request
	// named none, so a replay never depends on the server's flags.
	Takeover string `msgpack:"takeover" json:"takeover,omitempty"`
}

// TaskAmended is the body of task.amended (schema 1).
type TaskAmended struct {
	TaskID        string       `msgpack:"task_id" json:"task_id"`
	Revision      uint64       `msgpack:"revision" json:"revision"`
	Payload       string       `msgpack:"payload" json:"payload"`
	PayloadSHA256 string       `msgpack:"payload_sha256" json:"payload_sha256"`
	Version       uint64       `msgpack:"version" json:"version"`
	Closed        *ClosedClaim `msgpack:"closed_claim" json:"closed_claim"`
}

// TaskReferenceImageSet is the body of task.reference_image_set.
type TaskReferenceImageSet struct {
	TaskID   string       `msgpack:"task_id" json:"task_id"`
	Revision uint64       `msgpack:"revision" json:"revision"`
	SHA256   string       `msgpack:"sha256" json:"sha256"`
	Size     int64        `msgpack:"size" json:"size"`
	Version  uint64       `msgpack:"version" json:"version"`
	Closed   *ClosedClaim `msgpack:"closed_claim" json:"closed_claim"`
}

// TaskAuthorized is the body of task.authorized (schema 2). Schema 2 added
// takeover, the authorization's takeover policy; schema-1 bodies are upcast
// with it "" (reclaim, the only policy there was).
type TaskAuthorized struct {
	TaskID        string       `msgpack:"task_id" json:"task_id"`
	Authorization AuthBody     `msgpack:"authorization" json:"authorization"`
	Version       uint64       `msgpack:"version" json:"version"`
	Closed        *ClosedClaim `msgpack:"closed_claim" json:"closed_claim"`
	Takeover      string       `msgpack:"takeover" json:"takeover,omitempty"`
}

// TaskAuthorizationRevoked is the body of task.authorization_revoked.
type TaskAuthorizationRevoked struct {
	TaskID          string       `msgpack:"task_id" json:"task_id"`
	AuthorizationID string       `msgpack:"authorization_id" json:"authorization_id"`
	Reason          string       `msgpack:"reason" json:"reason"`
	Version         uint64       `msgpack:"version" json:"version"`
	Closed          *ClosedClaim `msgpack:"closed_claim" json:"closed_claim"`
}

// PresenceSnapshot is the presence a claim relied on.
type PresenceSnapshot struct {
	ReceivedAt       int64           `msgpack:"received_at" json:"received_at"`
	AppVersion       string          `msgpack:"app_version" json:"app_version"`
	OSVersion        string          `msgpack:"os_version" json:"os_version"`
	TargetAppVersion string          `msgpack:"target_app_version" json:"target_app_version"`
	Checks           map[string]bool `msgpack:"checks" json:"checks"`
	RequiredChecks   []string        `msgpack:"required_checks" json:"required_checks"`
}

// Token origins.
const (
	TokenClient = "client"
	TokenServer = "server"
)

// TaskClaimed is the body of task.claimed.
type TaskClaimed struct {
	TaskID                 string            `msgpack:"task_id" json:"task_id"`
	DeviceID               string            `msgpack:"device_id" json:"device_id"`
	SessionID              string            `msgpack:"session_id" json:"session_id"`
	Generation             uint64            `msgpack:"claim_generation" json:"claim_generation"`
	Version                uint64            `msgpack:"version" json:"version"`
	TokenOrigin            string            `msgpack:"token_origin" json:"token_origin"`
	TokenHash              string            `msgpack:"token_sha256" json:"-"`
	Nonce                  string            `msgpack:"nonce" json:"-"`
	AuthorizationID        string            `msgpack:"authorization_id" json:"authorization_id"`
	AuthorizationExpiresAt int64             `msgpack:"authorization_expires_at" json:"authorization_expires_at"`
	LeaseExpiresAt         int64             `msgpack:"lease_expires_at" json:"lease_expires_at"`
	PreviousDeviceID       string            `msgpack:"previous_device_id" json:"previous_device_id,omitempty"`
	Presence               *PresenceSnapshot `msgpack:"presence" json:"presence"`
	// SecretCheck is, for a server-issued token, the key-check value (hex)
	// of the secret that issued it (schema 2; "" for client-issued tokens
	// and in schema 1): the fold checks it against the node's at write
	// time, so the one stored value covers every claim (decision D324).
	SecretCheck string `msgpack:"secret_check" json:"-"`
}

// TaskClaimResumed is the body of task.claim_resumed.
type TaskClaimResumed struct {
	TaskID         string `msgpack:"task_id" json:"task_id"`
	DeviceID       string `msgpack:"device_id" json:"device_id"`
	SessionID      string `msgpack:"session_id" json:"session_id"`
	Generation     uint64 `msgpack:"claim_generation" json:"claim_generation"`
	LeaseExpiresAt int64  `msgpack:"lease_expires_at" json:"lease_expires_at"`
}

// TaskClaimRenewed is the body of task.claim_renewed.
type TaskClaimRenewed struct {
	TaskID            string `msgpack:"task_id" json:"task_id"`
	DeviceID          string `msgpack:"device_id" json:"device_id"`
	Generation        uint64 `msgpack:"claim_generation" json:"claim_generation"`
	PreviousExpiresAt int64  `msgpack:"previous_lease_expires_at" json:"previous_lease_expires_at"`
	LeaseExpiresAt    int64  `msgpack:"lease_expires_at" json:"lease_expires_at"`
}

// TaskReleased is the body of task.released.
type TaskReleased struct {
	TaskID     string `msgpack:"task_id" json:"task_id"`
	DeviceID   string `msgpack:"device_id" json:"device_id"`
	Generation uint64 `msgpack:"claim_generation" json:"claim_generation"`
	Version    uint64 `msgpack:"version" json:"version"`
}

// TaskStarted is the body of task.started.
type TaskStarted struct {
	TaskID          string `msgpack:"task_id" json:"task_id"`
	DeviceID        string `msgpack:"device_id" json:"device_id"`
	Generation      uint64 `msgpack:"claim_generation" json:"claim_generation"`
	ExecutionID     string `msgpack:"execution_id" json:"execution_id"`
	AuthorizationID string `msgpack:"authorization_id" json:"authorization_id"`
	LeaseExpiresAt  int64  `msgpack:"lease_expires_at" json:"lease_expires_at"`
	Version         uint64 `msgpack:"version" json:"version"`
}

// TaskHeartbeat is the body of task.heartbeat (schema 2). Schema 2 added
// previous_lease_expires_at, the running lease the heartbeat extended, so
// an auditor sees the lease chain and replay checks it; schema-1 bodies
// are upcast with it 0 (unknown). See upcast.go.
type TaskHeartbeat struct {
	TaskID            string `msgpack:"task_id" json:"task_id"`
	DeviceID          string `msgpack:"device_id" json:"device_id"`
	Generation        uint64 `msgpack:"claim_generation" json:"claim_generation"`
	ExecutionID       string `msgpack:"execution_id" json:"execution_id"`
	PreviousExpiresAt int64  `msgpack:"previous_lease_expires_at" json:"previous_lease_expires_at,omitempty"`
	LeaseExpiresAt    int64  `msgpack:"lease_expires_at" json:"lease_expires_at"`
	Step              string `msgpack:"step" json:"step"`
	ClientTime        *int64 `msgpack:"client_time" json:"client_time"`
}

// TaskExecStep is the body of task.awaiting_confirmation, task.resumed and
// task.canceled by cancel-ack: a state change of the current execution.
type TaskExecStep struct {
	TaskID      string `msgpack:"task_id" json:"task_id"`
	DeviceID    string `msgpack:"device_id" json:"device_id"`
	Generation  uint64 `msgpack:"claim_generation" json:"claim_generation"`
	ExecutionID string `msgpack:"execution_id" json:"execution_id"`
	Version     uint64 `msgpack:"version" json:"version"`
	Reason      string `msgpack:"reason" json:"reason"`
	// LeaseExpiresAt is the running lease this decision was judged against
	// (0 in logs written before quiet heartbeats: the lease the events set).
	LeaseExpiresAt int64 `msgpack:"lease_expires_at" json:"lease_expires_at,omitempty"`
}

// TaskCompleted is the body of task.completed.
type TaskCompleted struct {
	TaskID      string `msgpack:"task_id" json:"task_id"`
	DeviceID    string `msgpack:"device_id" json:"device_id"`
	Generation  uint64 `msgpack:"claim_generation" json:"claim_generation"`
	ExecutionID string `msgpack:"execution_id" json:"execution_id"`
	Version     uint64 `msgpack:"version" json:"version"`
	Result      string `msgpack:"result" json:"result"` // canonical JSON object
	// LeaseExpiresAt is the running lease this decision was judged against
	// (0 in logs written before quiet heartbeats: the lease the events set).
	LeaseExpiresAt int64 `msgpack:"lease_expires_at" json:"lease_expires_at,omitempty"`
}

// TaskFailed is the body of task.failed.
type TaskFailed struct {
	TaskID      string `msgpack:"task_id" json:"task_id"`
	DeviceID    string `msgpack:"device_id" json:"device_id"`
	Generation  uint64 `msgpack:"claim_generation" json:"claim_generation"`
	ExecutionID string `msgpack:"execution_id" json:"execution_id"`
	Version     uint64 `msgpack:"version" json:"version"`
	ReasonCode  string `msgpack:"reason_code" json:"reason_code"`
	Detail      string `msgpack:"detail" json:"detail"`
	// LeaseExpiresAt is the running lease this decision was judged against
	// (0 in logs written before quiet heartbeats: the lease the events set).
	LeaseExpiresAt int64 `msgpack:"lease_expires_at" json:"lease_expires_at,omitempty"`
}

// TaskLateReport is the body of task.late_report.
type TaskLateReport struct {
	TaskID      string `msgpack:"task_id" json:"task_id"`
	DeviceID    string `msgpack:"device_id" json:"device_id"`
	Generation  uint64 `msgpack:"claim_generation" json:"claim_generation"`
	ExecutionID string `msgpack:"execution_id" json:"execution_id"`
	Outcome     string `msgpack:"outcome" json:"outcome"` // "complete" or "fail"
	Result      string `msgpack:"result" json:"result"`
	ReasonCode  string `msgpack:"reason_code" json:"reason_code"`
	Detail      string `msgpack:"detail" json:"detail"`
	// LeaseExpiresAt is the running lease this decision was judged against
	// (0 in logs written before quiet heartbeats: the lease the events set).
	LeaseExpiresAt int64 `msgpack:"lease_expires_at" json:"lease_expires_at,omitempty"`
}

// TaskCancelRequested is the body of task.cancel_requested.
type TaskCancelRequested struct {
	TaskID string `msgpack:"task_id" json:"task_id"`
	Reason string `msgpack:"reason" json:"reason"`
}

// TaskCanceled is the body of task.canceled. By is "operator" for an
// immediate cancel of a PENDING/CLAIMED task and "device" for cancel-ack.
type TaskCanceled struct {
	TaskID      string `msgpack:"task_id" json:"task_id"`
	By          string `msgpack:"by" json:"by"`
	Reason      string `msgpack:"reason" json:"reason"`
	DeviceID    string `msgpack:"device_id" json:"device_id"`
	Generation  uint64 `msgpack:"claim_generation" json:"claim_generation"`
	ExecutionID string `msgpack:"execution_id" json:"execution_id"`
	Version     uint64 `msgpack:"version" json:"version"`
	// LeaseExpiresAt is the running lease this decision was judged against
	// (0 in logs written before quiet heartbeats: the lease the events set).
	LeaseExpiresAt int64 `msgpack:"lease_expires_at" json:"lease_expires_at,omitempty"`
}

// Recovery decisions.
const (
	RecoverFail    = "fail"
	RecoverRequeue = "requeue"
)

// TaskRecovered is the body of task.recovered.
type TaskRecovered struct {
	TaskID      string `msgpack:"task_id" json:"task_id"`
	Decision    string `msgpack:"decision" json:"decision"`
	Reason      string `msgpack:"reason" json:"reason"`
	DeviceID    string `msgpack:"device_id" json:"device_id"`
	Generation  uint64 `msgpack:"claim_generation" json:"claim_generation"`
	ExecutionID string `msgpack:"execution_id" json:"execution_id"`
	Version     uint64 `msgpack:"version" json:"version"`
	// LeaseExpiresAt is the running lease this decision was judged against
	// (0 in logs written before quiet heartbeats: the lease the events set).
	LeaseExpiresAt int64 `msgpack:"lease_expires_at" json:"lease_expires_at,omitempty"`
}

// TaskEvidenceAttached is the body of task.evidence_attached.
type TaskEvidenceAttached struct {
	TaskID      string `msgpack:"task_id" json:"task_id"`
	DeviceID    string `msgpack:"device_id" json:"device_id"`
	Generation  uint64 `msgpack:"claim_generation" json:"claim_generation"`
	ExecutionID string `msgpack:"execution_id" json:"execution_id"`
	EvidenceID  string `msgpack:"evidence_id" json:"evidence_id"`
	SHA256      string `msgpack:"sha256" json:"sha256"`
	Size        int64  `msgpack:"size" json:"size"`
	Kind        string `msgpack:"kind" json:"kind"`
	CapturedAt  int64  `msgpack:"captured_at" json:"captured_at"`
	// LeaseExpiresAt is the running lease this decision was judged against
	// (0 in logs written before quiet heartbeats: the lease the events set).
	LeaseExpiresAt int64 `msgpack:"lease_expires_at" json:"lease_expires_at,omitempty"`
}

// DeviceRegistered is the body of device.registered.
type DeviceRegistered struct {
	DeviceID       string   `msgpack:"device_id" json:"device_id"`
	OwnerID        string   `msgpack:"owner_id" json:"owner_id"`
	Name           string   `msgpack:"name" json:"name"`
	HasChecks      bool     `msgpack:"has_required_checks" json:"has_required_checks"`
	RequiredChecks []string `msgpack:"required_checks" json:"required_checks"`
	TokenHash      string   `msgpack:"token_sha256" json:"-"`
}

// DeviceRevoked is the body of device.revoked.
type DeviceRevoked struct {
	DeviceID string `msgpack:"device_id" json:"device_id"`
	Reason   string `msgpack:"reason" json:"reason"`
}

// DeviceClaimRequiresManual is the body of device.claim_requires_manual.
type DeviceClaimRequiresManual struct {
	DeviceID  string `msgpack:"device_id" json:"device_id"`
	SessionID string `msgpack:"session_id" json:"session_id"`
	TaskID    string `msgpack:"task_id" json:"task_id"`
}

// AdminTokenCreated is the body of admin_token.created. The token itself
// is never written: only its SHA-256, which no answer shows.
//
// Schema 2 adds role ("admin", "operator" or "auditor"); a schema-1 body
// (written before roles existed) reads as "admin", the only power a token
// had then.
type AdminTokenCreated struct {
	Name      string `msgpack:"name" json:"name"`
	TokenHash string `msgpack:"token_sha256" json:"-"`
	Role      string `msgpack:"role" json:"role"`
}

// AdminTokenRevoked is the body of admin_token.revoked.
type AdminTokenRevoked struct {
	Name   string `msgpack:"name" json:"name"`
	Reason string `msgpack:"reason" json:"reason"`
}
