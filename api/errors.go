package api

import (
	"errors"
	"net/http"

	"taskledger/commands"
	"taskledger/projections"
)

// apiError is an answer with a stable code.
type apiError struct {
	Status  int
	Code    string
	Message string
}

func (e *apiError) Error() string { return e.Code + ": " + e.Message }

func newErr(status int, code, msg string) *apiError { return &apiError{status, code, msg} }

// Request-level errors the api produces itself.
var (
	errUnsupportedMedia = newErr(http.StatusUnsupportedMediaType, "unsupported_media_type", "Content-Type must be application/json")
	errBodyTooLarge     = newErr(http.StatusRequestEntityTooLarge, "body_too_large", "request body is too large")
	errIdemKey          = newErr(http.StatusBadRequest, "invalid_idempotency_key", "Idempotency-Key must be a canonical lowercase UUIDv4")
	errClaimToken       = newErr(http.StatusBadRequest, "invalid_claim_token", "X-Claim-Token must be 43 base64url characters or 64 lowercase hex characters")
	errWrongKind        = newErr(http.StatusForbidden, "wrong_credential_kind", "this credential is not valid for this route")
	errDeviceMismatch   = newErr(http.StatusForbidden, "device_mismatch", "device_id is not the authenticated device")
	errInvalidTTL       = newErr(http.StatusUnprocessableEntity, "invalid_ttl", "ttl_seconds is outside the configured authorization TTL bounds")
	errInvalidJPEG      = newErr(http.StatusBadRequest, "invalid_jpeg", "body is not a JPEG image")
	errInvalidPNG       = newErr(http.StatusBadRequest, "invalid_png", "body is not a PNG image")
	errNotFound         = newErr(http.StatusNotFound, "not_found", "no such route")
	errMethod           = newErr(http.StatusMethodNotAllowed, "method_not_allowed", "method not allowed on this route")
)

// errorTable maps every domain error to its HTTP status and stable code.
// Codes are only ever appended, never reused.
var errorTable = []struct {
	err    error
	status int
	code   string
	msg    string
}{
	{commands.ErrDeviceRevoked, http.StatusForbidden, "device_revoked", "the device is revoked"},
	{commands.ErrIdempotencyConflict, http.StatusConflict, "idempotency_conflict", "the Idempotency-Key was used with another request"},
	{commands.ErrIdempotencyKeyExpired, http.StatusConflict, "idempotency_key_expired", "the Idempotency-Key has expired"},
	{commands.ErrClaimReplayExpired, http.StatusConflict, "claim_replay_expired", "the replayed claim or execution is no longer current"},
	{commands.ErrClaimNotFound, http.StatusNotFound, "claim_not_found", "no claim of this device on this task"},
	{commands.ErrClaimTokenMismatch, http.StatusForbidden, "claim_token_mismatch", "the claim token does not match"},
	{commands.ErrClaimGenerationMismatch, http.StatusConflict, "claim_generation_mismatch", "the claim generation does not match"},
	{commands.ErrLeaseExpired, http.StatusConflict, "lease_expired", "the lease has expired"},
	{commands.ErrInvalidState, http.StatusConflict, "invalid_state", "not allowed in the task's current state"},
	{commands.ErrExecutionMismatch, http.StatusConflict, "execution_mismatch", "the execution does not match"},
	{commands.ErrSessionMismatch, http.StatusConflict, "session_mismatch", "the session does not match"},
	{commands.ErrVersionMismatch, http.StatusConflict, "version_mismatch", "the version does not match"},
	{commands.ErrLeaseExpectationMismatch, http.StatusConflict, "lease_expectation_mismatch", "the lease expiry does not match the expectation"},
	{commands.ErrCancelNotRequested, http.StatusConflict, "cancel_not_requested", "cancellation was not requested"},
	{commands.ErrDeviceNotReady, http.StatusConflict, "device_not_ready", "presence is stale or a required check is not true"},
	{commands.ErrClaimRequiresManual, http.StatusConflict, "claim_requires_manual", "the device holds an open task that this request cannot resume"},
	{commands.ErrClaimTokenRequired, http.StatusBadRequest, "claim_token_required", "X-Claim-Token is required: the server does not issue claim tokens"},
	{commands.ErrTaskNotFound, http.StatusNotFound, "task_not_found", "no such task"},
	{commands.ErrDeviceNotFound, http.StatusNotFound, "device_not_found", "no such device"},
	{commands.ErrRevisionMismatch, http.StatusConflict, "revision_mismatch", "the revision does not match"},
	{commands.ErrLeaseNotExpired, http.StatusConflict, "lease_not_expired", "the task's lease has not expired"},
	{commands.ErrNoReferenceImage, http.StatusNotFound, "no_reference_image", "the task has no reference image"},
	{commands.ErrEvidenceNotFound, http.StatusNotFound, "evidence_not_found", "no such evidence"},
	{commands.ErrAdminTokenExists, http.StatusConflict, "admin_token_exists", "an admin token of that name exists"},
	{commands.ErrAdminTokenNotFound, http.StatusNotFound, "admin_token_not_found", "no such admin token"},
	{commands.ErrLastAdminToken, http.StatusConflict, "last_admin_token", "the last active admin token cannot be revoked"},
	{commands.ErrUnknownRole, http.StatusBadRequest, "unknown_role", "role must be \"admin\", \"operator\" or \"auditor\""},
	{commands.ErrInsufficientRole, http.StatusForbidden, "insufficient_role", "this admin token's role does not allow this"},
}

// toAPIError maps any error to its answer; unknown errors are 500.
func toAPIError(err error) *apiError {
	var ae *apiError
	if errors.As(err, &ae) {
		return ae
	}
	var inv *errInvalid
	if errors.As(err, &inv) {
		return newErr(http.StatusBadRequest, "invalid_request", inv.msg)
	}
	for _, e := range errorTable {
		if errors.Is(err, e.err) {
			return newErr(e.status, e.code, e.msg)
		}
	}
	return newErr(http.StatusInternalServerError, "internal", "internal error")
}

// isUnavailable reports errors answered 503 with an empty body.
func isUnavailable(err error) bool {
	return errors.Is(err, commands.ErrUnavailable) || errors.Is(err, commands.ErrShuttingDown)
}

// outcomeStatuses maps every recorded domain outcome to the HTTP status
// its answer carries (a refusal's status comes from its code, through
// errorTable). TestOutcomeStatusCoversEveryOutcome walks it.
var outcomeStatuses = map[projections.Outcome]int{
	projections.OutcomeAccepted: http.StatusOK,
	projections.OutcomeCreated:  http.StatusCreated,
	projections.OutcomeNoTask:   http.StatusNoContent,
	projections.OutcomeRefused:  http.StatusConflict,
}

// outcomeStatus is the HTTP status of an outcome; an unknown one is a
// server fault.
func outcomeStatus(o projections.Outcome) int {
	if s, ok := outcomeStatuses[o]; ok {
		return s
	}
	return http.StatusInternalServerError
}
