package client

// Error codes of the device routes (api.md), with the one status each is
// answered with. A known code with another status is a protocol error
// (unknown outcome); a well-formed error with a code not listed here is a
// definitive rejection the caller reports (protocol 4xx).
var errorCodes = map[string]int{
	"invalid_request":            400,
	"invalid_idempotency_key":    400,
	"invalid_claim_token":        400,
	"claim_token_required":       400,
	"invalid_png":                400,
	"wrong_credential_kind":      403,
	"device_mismatch":            403,
	"device_revoked":             403,
	"claim_token_mismatch":       403,
	"claim_not_found":            404,
	"no_reference_image":         404,
	"idempotency_conflict":       409,
	"claim_replay_expired":       409,
	"idempotency_key_expired":    409,
	"claim_requires_manual":      409,
	"device_not_ready":           409,
	"claim_generation_mismatch":  409,
	"lease_expired":              409,
	"invalid_state":              409,
	"execution_mismatch":         409,
	"session_mismatch":           409,
	"version_mismatch":           409,
	"lease_expectation_mismatch": 409,
	"cancel_not_requested":       409,
	"body_too_large":             413,
	"unsupported_media_type":     415,
}

// Stable error codes the recovery logic acts on.
const (
	CodeDeviceNotReady      = "device_not_ready"
	CodeClaimRequiresManual = "claim_requires_manual"
	CodeClaimNotFound       = "claim_not_found"
	CodeLeaseExpired        = "lease_expired"
	CodeClaimReplayExpired  = "claim_replay_expired"
	CodeDeviceRevoked       = "device_revoked"
	CodeCancelNotRequested  = "cancel_not_requested"
)

// Allowed statuses per route family.
var (
	presenceStatuses = []int{200, 400, 401, 403, 413, 415}
	claimStatuses    = []int{200, 204, 400, 401, 403, 409, 413, 415}
	taskStatuses     = []int{200, 400, 401, 403, 404, 409, 413, 415}
	evidenceStatuses = []int{201, 400, 401, 403, 404, 409, 413, 415}
	imageStatuses    = []int{200, 400, 401, 403, 404, 409}
)
