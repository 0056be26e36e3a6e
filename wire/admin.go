package wire

import "encoding/json"

// The admin API's bodies. Fields are declared in the order of their names
// (encoding/json then writes the keys sorted; TestWireFieldsAreInNameOrder).

// Device is the device document (GET /admin/devices/{id}, the answer of
// register and revoke, each item of GET /admin/devices): never the
// token's hash. token is in the first answer of a registration only;
// revoked_at and revoke_reason once revoked.
type Device struct {
	DeviceID       string          `json:"device_id" wire:"uuid"`
	Name           string          `json:"name" wire:"len=1..128;ascii"`
	OpenTaskID     *string         `json:"open_task_id" wire:"uuid"`
	OwnerID        string          `json:"owner_id" wire:"uuid"`
	Presence       *DevicePresence `json:"presence"`
	RegisteredAt   string          `json:"registered_at" wire:"time"`
	RequiredChecks []string        `json:"required_checks" wire:"items=0..16"`
	RevokeReason   *string         `json:"revoke_reason,omitempty"`
	RevokedAt      string          `json:"revoked_at,omitempty" wire:"time"`
	Status         string          `json:"status" wire:"enum=ACTIVE|REVOKED"`
	Token          string          `json:"token,omitempty"`
}

// DevicePresence is a device's last presence report as the server sees it.
type DevicePresence struct {
	AppVersion       string          `json:"app_version"`
	Checks           map[string]bool `json:"checks"`
	Claimable        bool            `json:"claimable"`
	LastSeenAt       string          `json:"last_seen_at" wire:"time"`
	Online           bool            `json:"online"`
	OSVersion        string          `json:"os_version"`
	TargetAppVersion string          `json:"target_app_version"`
}

// DevicePage is GET /admin/devices.
type DevicePage struct {
	Devices    []Device `json:"devices"`
	ServerTime string   `json:"server_time" wire:"time"`
}

// RegisterDeviceRequest is POST /admin/devices; required_checks absent
// means the server's default checks.
type RegisterDeviceRequest struct {
	Name           string   `json:"name" wire:"len=1..128;ascii"`
	OwnerID        string   `json:"owner_id" wire:"uuid"`
	RequiredChecks []string `json:"required_checks,omitempty" wire:"items=0..16;unique;pattern=^[a-z0-9_]{1,32}$"`
}

// ReasonRequest is every revocation: POST /admin/devices/{id}/revoke,
// /admin/tasks/{id}/authorization/revoke and
// /admin/admin-tokens/{name}/revoke (at most 256 bytes).
type ReasonRequest struct {
	Reason string `json:"reason" wire:"len=0..256"`
}

// CreateTaskRequest is POST /admin/tasks; payload is at most 16 KiB in
// canonical form.
type CreateTaskRequest struct {
	Authorize *AuthorizeOptions `json:"authorize,omitempty"`
	Payload   json.RawMessage   `json:"payload" wire:"object"`
}

// AuthorizeOptions authorizes a task as it is created; ttl_seconds beyond
// the server's bounds is 422 invalid_ttl. The server also reads a null
// takeover as absent (the server's default); the document names only the
// two policies.
type AuthorizeOptions struct {
	Takeover   *Takeover `json:"takeover,omitempty"`
	TTLSeconds int64     `json:"ttl_seconds" wire:"min=1"`
}

// AmendRequest is POST /admin/tasks/{id}/amend.
type AmendRequest struct {
	ExpectedRevision uint64          `json:"expected_revision" wire:"range=1..9007199254740991"`
	Payload          json.RawMessage `json:"payload" wire:"object"`
}

// AuthorizeRequest is POST /admin/tasks/{id}/authorize.
type AuthorizeRequest struct {
	ExpectedRevision uint64    `json:"expected_revision" wire:"range=1..9007199254740991"`
	Takeover         *Takeover `json:"takeover,omitempty"`
	TTLSeconds       int64     `json:"ttl_seconds" wire:"min=1"`
}

// CancelRequest is POST /admin/tasks/{id}/cancel.
type CancelRequest struct {
	ExpectedVersion *uint64 `json:"expected_version,omitempty" wire:"range=1..9007199254740991"`
	Reason          string  `json:"reason" wire:"len=0..256"`
}

// RecoverRequest is POST /admin/tasks/{id}/recover.
type RecoverRequest struct {
	Decision        RecoveryDecision `json:"decision"`
	ExpectedVersion uint64           `json:"expected_version" wire:"range=1..9007199254740991"`
	Reason          string           `json:"reason" wire:"len=0..256"`
}

// AdvanceClockRequest is POST /admin/test-clock/advance (test clock only).
type AdvanceClockRequest struct {
	Seconds int64 `json:"seconds" wire:"range=1..86400"`
}

// ServerTime answers POST /admin/test-clock/advance.
type ServerTime struct {
	ServerTime string `json:"server_time" wire:"time"`
}

// AdminToken is an admin token's document: never the token's hash; token
// is in the first answer of a creation only.
type AdminToken struct {
	CreatedAt    string  `json:"created_at,omitempty" wire:"time"`
	CreatedBy    *string `json:"created_by,omitempty"`
	Name         string  `json:"name" wire:"pattern=^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$"`
	Origin       string  `json:"origin" wire:"enum=log|data_dir"`
	RevokeReason *string `json:"revoke_reason,omitempty"`
	RevokedAt    string  `json:"revoked_at,omitempty" wire:"time"`
	RevokedBy    *string `json:"revoked_by,omitempty"`
	Role         Role    `json:"role" wire:"enum=admin|operator|auditor"`
	Status       string  `json:"status" wire:"enum=ACTIVE|REVOKED"`
	Token        string  `json:"token,omitempty" wire:"pattern=^tladm_[A-Za-z0-9_-]{43}$"`
}

// AdminTokenList is GET /admin/admin-tokens.
type AdminTokenList struct {
	AdminTokens []AdminToken `json:"admin_tokens"`
}

// CreateAdminTokenRequest is POST /admin/admin-tokens; role absent is
// admin (the server also reads null as absent, and answers another role
// 400 unknown_role).
type CreateAdminTokenRequest struct {
	Name string `json:"name" wire:"pattern=^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$"`
	Role *Role  `json:"role,omitempty" wire:"enum=admin|operator|auditor"`
}

// WhoAmI is GET /admin/whoami.
type WhoAmI struct {
	Name string `json:"name"`
	Role Role   `json:"role" wire:"enum=admin|operator|auditor"`
}

// Error is every error answer but 401 and 503 (empty bodies): a stable
// code and a message for people.
type Error struct {
	// Code is one of the stable codes of api's error table (the
	// document's enum lists each; "*" says the list lives there).
	Code    string `json:"code" wire:"enum=*"`
	Message string `json:"message"`
}

// Status is GET /healthz and a ready GET /readyz.
type Status struct {
	Status string `json:"status"`
}

// NotReady is a GET /readyz that is not ready (503).
type NotReady struct {
	Reason string `json:"reason" wire:"enum=shutting_down|fenced|log_unavailable|no_sequencer|no_quorum|disk_full|storage_failing"`
	Status string `json:"status" wire:"enum=not_ready"`
}
