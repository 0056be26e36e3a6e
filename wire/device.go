package wire

import "encoding/json"

// The device API's bodies: what a device sends (…Request) and what it is
// answered. Fields are declared in the order of their names (encoding/json
// then writes the keys sorted; TestWireFieldsAreInNameOrder).

// PresenceRequest is POST /device/heartbeat.
type PresenceRequest struct {
	ActiveTaskID     *string         `json:"active_task_id,omitempty" wire:"uuid;null"`
	AppVersion       string          `json:"app_version" wire:"len=1..64;ascii"`
	Checks           map[string]bool `json:"checks" wire:"keys=1..16;pattern=^[a-z0-9_]{1,32}$"`
	ClientTime       *string         `json:"client_time,omitempty" wire:"time;null"`
	DeviceID         string          `json:"device_id" wire:"uuid"`
	OSVersion        string          `json:"os_version" wire:"len=1..64;ascii"`
	TargetAppVersion string          `json:"target_app_version" wire:"len=1..64;ascii"`
}

// PresenceAnswer answers a presence report.
type PresenceAnswer struct {
	ActiveTaskID       *string  `json:"active_task_id" wire:"uuid"`
	ActiveTaskMismatch bool     `json:"active_task_mismatch"`
	Claimable          bool     `json:"claimable"`
	MissingChecks      []string `json:"missing_checks" wire:"pattern=^[a-z0-9_]{1,32}$"`
	PresenceExpiresAt  string   `json:"presence_expires_at" wire:"time"`
	ServerTime         string   `json:"server_time" wire:"time"`
}

// ClaimRequest is POST /device/tasks/claim-next.
type ClaimRequest struct {
	DeviceID  string `json:"device_id" wire:"uuid"`
	SessionID string `json:"session_id" wire:"uuid"`
}

// ClaimAnswer answers a claim: the claim and the claimed task.
type ClaimAnswer struct {
	Claim           ClaimGrant  `json:"claim"`
	ClaimGeneration uint64      `json:"claim_generation" wire:"range=1..9007199254740991"`
	LeaseExpiresAt  string      `json:"lease_expires_at" wire:"time"`
	ServerTime      string      `json:"server_time" wire:"time"`
	State           State       `json:"state"`
	Task            ClaimedTask `json:"task"`
	Version         uint64      `json:"version" wire:"range=1..9007199254740991"`
}

// ClaimGrant is the claim of a claim answer: takeover is there only for a
// manual takeover, token only for a server-issued token.
type ClaimGrant struct {
	AuthorizationExpiresAt string   `json:"authorization_expires_at" wire:"time"`
	Generation             uint64   `json:"generation" wire:"range=1..9007199254740991"`
	LeaseExpiresAt         string   `json:"lease_expires_at" wire:"time"`
	SessionID              string   `json:"session_id" wire:"uuid"`
	Takeover               Takeover `json:"takeover,omitempty"`
	Token                  string   `json:"token,omitempty" wire:"pattern=^[0-9a-f]{64}$"`
}

// ClaimedTask is the task of a claim answer.
type ClaimedTask struct {
	CreatedAt         string          `json:"created_at" wire:"time"`
	ID                string          `json:"id" wire:"uuid"`
	Payload           json.RawMessage `json:"payload" wire:"object"`
	ReferenceImageURL string          `json:"reference_image_url,omitempty"`
	Revision          uint64          `json:"revision" wire:"range=1..9007199254740991"`
}

// RenewRequest is POST /device/tasks/{id}/lease/renew.
type RenewRequest struct {
	ClaimGeneration        uint64 `json:"claim_generation" wire:"range=1..9007199254740991"`
	DeviceID               string `json:"device_id" wire:"uuid"`
	ExpectedLeaseExpiresAt string `json:"expected_lease_expires_at" wire:"time"`
	SessionID              string `json:"session_id" wire:"uuid"`
}

// ClaimVersionRequest is POST /device/tasks/{id}/release and …/start.
type ClaimVersionRequest struct {
	ClaimGeneration uint64 `json:"claim_generation" wire:"range=1..9007199254740991"`
	DeviceID        string `json:"device_id" wire:"uuid"`
	ExpectedVersion uint64 `json:"expected_version" wire:"range=1..9007199254740991"`
}

// HeartbeatRequest is POST /device/tasks/{id}/heartbeat.
type HeartbeatRequest struct {
	ClaimGeneration uint64  `json:"claim_generation" wire:"range=1..9007199254740991"`
	ClientTime      *string `json:"client_time,omitempty" wire:"time;null"`
	DeviceID        string  `json:"device_id" wire:"uuid"`
	ExecutionID     string  `json:"execution_id" wire:"uuid"`
	Step            string  `json:"step" wire:"len=1..64;ascii"`
}

// ExecutionRequest is POST /device/tasks/{id}/resume and …/cancel-ack.
type ExecutionRequest struct {
	ClaimGeneration uint64 `json:"claim_generation" wire:"range=1..9007199254740991"`
	DeviceID        string `json:"device_id" wire:"uuid"`
	ExecutionID     string `json:"execution_id" wire:"uuid"`
	ExpectedVersion uint64 `json:"expected_version" wire:"range=1..9007199254740991"`
}

// AwaitConfirmationRequest is POST /device/tasks/{id}/await-confirmation.
type AwaitConfirmationRequest struct {
	ClaimGeneration uint64 `json:"claim_generation" wire:"range=1..9007199254740991"`
	DeviceID        string `json:"device_id" wire:"uuid"`
	ExecutionID     string `json:"execution_id" wire:"uuid"`
	ExpectedVersion uint64 `json:"expected_version" wire:"range=1..9007199254740991"`
	Reason          string `json:"reason" wire:"len=0..256"`
}

// CompleteRequest is POST /device/tasks/{id}/complete; result is at most
// 16 KiB in canonical form.
type CompleteRequest struct {
	ClaimGeneration uint64          `json:"claim_generation" wire:"range=1..9007199254740991"`
	DeviceID        string          `json:"device_id" wire:"uuid"`
	ExecutionID     string          `json:"execution_id" wire:"uuid"`
	ExpectedVersion uint64          `json:"expected_version" wire:"range=1..9007199254740991"`
	Result          json.RawMessage `json:"result" wire:"object"`
}

// FailRequest is POST /device/tasks/{id}/fail.
type FailRequest struct {
	ClaimGeneration uint64 `json:"claim_generation" wire:"range=1..9007199254740991"`
	Detail          string `json:"detail" wire:"len=0..256"`
	DeviceID        string `json:"device_id" wire:"uuid"`
	ExecutionID     string `json:"execution_id" wire:"uuid"`
	ExpectedVersion uint64 `json:"expected_version" wire:"range=1..9007199254740991"`
	ReasonCode      string `json:"reason_code" wire:"pattern=^[a-z0-9_]{1,64}$"`
}

// DeviceTaskAnswer answers every task-scoped device command: execution_id
// is there once an execution started, step once a heartbeat named one;
// lease_expires_at is null once the task ended.
type DeviceTaskAnswer struct {
	CancelRequested bool    `json:"cancel_requested"`
	ClaimGeneration uint64  `json:"claim_generation" wire:"range=1..9007199254740991"`
	ExecutionID     string  `json:"execution_id,omitempty" wire:"uuid"`
	LeaseExpiresAt  *string `json:"lease_expires_at" wire:"time"`
	ServerTime      string  `json:"server_time" wire:"time"`
	State           State   `json:"state"`
	Step            string  `json:"step,omitempty"`
	TaskID          string  `json:"task_id" wire:"uuid"`
	Version         uint64  `json:"version" wire:"range=1..9007199254740991"`
}
