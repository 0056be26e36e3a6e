package commands

import "errors"

// Domain errors. The api package maps each one to an HTTP status and a
// stable code (api/errors.go); the text here is for logs and tests.
var (
	ErrDeviceRevoked            = errors.New("commands: device revoked")
	ErrIdempotencyConflict      = errors.New("commands: idempotency key reused with another request")
	ErrIdempotencyKeyExpired    = errors.New("commands: idempotency key expired")
	ErrClaimReplayExpired       = errors.New("commands: replayed claim or execution is no longer current")
	ErrClaimNotFound            = errors.New("commands: the device does not hold this task")
	ErrClaimTokenMismatch       = errors.New("commands: claim token does not match")
	ErrClaimGenerationMismatch  = errors.New("commands: claim generation does not match")
	ErrLeaseExpired             = errors.New("commands: lease expired")
	ErrInvalidState             = errors.New("commands: not allowed in the task's state")
	ErrExecutionMismatch        = errors.New("commands: execution does not match")
	ErrSessionMismatch          = errors.New("commands: session does not match")
	ErrVersionMismatch          = errors.New("commands: version does not match")
	ErrLeaseExpectationMismatch = errors.New("commands: lease expectation does not match")
	ErrCancelNotRequested       = errors.New("commands: cancel was not requested")
	ErrDeviceNotReady           = errors.New("commands: device not ready")
	ErrClaimRequiresManual      = errors.New("commands: device holds an open task this request cannot resume")
	ErrClaimTokenRequired       = errors.New("commands: claim token required")
	ErrTaskNotFound             = errors.New("commands: task not found")
	ErrDeviceNotFound           = errors.New("commands: device not found")
	ErrRevisionMismatch         = errors.New("commands: revision does not match")
	ErrLeaseNotExpired          = errors.New("commands: lease not expired")
	ErrNoReferenceImage         = errors.New("commands: task has no reference image")
	ErrUnavailable              = errors.New("commands: ledger unavailable")
	ErrShuttingDown             = errors.New("commands: shutting down")
	ErrFenced                   = errors.New("commands: fenced after a failed write or sync of the log; restart to read the log from disk")
	ErrEvidenceNotFound         = errors.New("commands: evidence not found")
	ErrInternal                 = errors.New("commands: internal error")
)

// recordedErrors maps the codes a record may carry to their errors.
var recordedErrors = map[string]error{
	"claim_requires_manual": ErrClaimRequiresManual,
	"lease_expired":         ErrLeaseExpired,
}

// RecordedError returns the error of a recorded 409 code.
func RecordedError(code string) error {
	if err, ok := recordedErrors[code]; ok {
		return err
	}
	return ErrInternal
}
