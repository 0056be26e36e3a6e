// Package wire holds what the server (api/) and the device client
// (client/) must agree on byte for byte: the task states as they appear in
// documents, the time layout of every time the server writes, the form
// of identifiers (canonical lowercase UUIDv4), and the one strict JSON
// reader (strictjson.go) that reads both the requests and the answers. It imports nothing of
// the server and nothing outside the standard library.
package wire

import "time"

// Task states as written in task documents (domain states; projections and
// client both define theirs from these).
// State is a task's state as written in task documents.
type State string

const (
	// StatePending: waiting for a device to claim it.
	StatePending State = "PENDING"
	// StateClaimed: a device holds a claim lease and has not started.
	StateClaimed State = "CLAIMED"
	// StateRunning: a device is executing under a running lease.
	StateRunning State = "RUNNING"
	// StateWaitingConfirmation: the execution paused for a confirmation.
	StateWaitingConfirmation State = "WAITING_CONFIRMATION"
	// StateSucceeded: the execution completed with a result (terminal).
	StateSucceeded State = "SUCCEEDED"
	// StateFailed: the execution or a recovery failed the task (terminal).
	StateFailed State = "FAILED"
	// StateCanceled: an operator or a cancel-ack ended the task (terminal).
	StateCanceled State = "CANCELED"
)

// AllStates lists every task state, in the order of the state machine.
func AllStates() []State {
	return []State{StatePending, StateClaimed, StateRunning, StateWaitingConfirmation,
		StateSucceeded, StateFailed, StateCanceled}
}

// TimeLayout is the wire format of every time the server writes: RFC 3339,
// UTC, exactly three fractional digits.
const TimeLayout = "2006-01-02T15:04:05.000Z"

// FormatMillis writes Unix milliseconds in TimeLayout.
func FormatMillis(ms int64) string { return time.UnixMilli(ms).UTC().Format(TimeLayout) }

// AppendMillis appends FormatMillis(ms) to b.
func AppendMillis(b []byte, ms int64) []byte {
	return time.UnixMilli(ms).UTC().AppendFormat(b, TimeLayout)
}

// IsUUID reports whether s is a canonical lowercase UUIDv4 (version 4,
// RFC 4122 variant, 36 characters, lowercase hex): what
// ^[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$
// matches, checked byte by byte (every request checks several).
func IsUUID(s string) bool {
	if len(s) != 36 || s[14] != '4' {
		return false
	}
	switch s[19] {
	case '8', '9', 'a', 'b':
	default:
		return false
	}
	for i := 0; i < len(s); i++ {
		switch c := s[i]; i {
		case 8, 13, 18, 23:
			if c != '-' {
				return false
			}
		default:
			if !('0' <= c && c <= '9' || 'a' <= c && c <= 'f') {
				return false
			}
		}
	}
	return true
}

// Role is what an admin token may do, as written in admin token documents
// and in the admin_token.created event.
type Role string

const (
	// RoleAdmin may do everything, admin tokens included.
	RoleAdmin Role = "admin"
	// RoleOperator works tasks and devices; it cannot touch admin tokens.
	RoleOperator Role = "operator"
	// RoleAuditor reads and proves: task and device reads, history, the
	// event stream, the raw log, checkpoints, proofs and bundles.
	RoleAuditor Role = "auditor"
)

// AllRoles lists every role, most powerful first.
func AllRoles() []Role { return []Role{RoleAdmin, RoleOperator, RoleAuditor} }

// ParseRole returns the role named s; "" is RoleAdmin (a token created
// before roles existed, or a request that names none).
func ParseRole(s string) (Role, bool) {
	switch r := Role(s); r {
	case "":
		return RoleAdmin, true
	case RoleAdmin, RoleOperator, RoleAuditor:
		return r, true
	}
	return "", false
}

// Rank orders the roles: a token may only act on tokens of a rank at most
// its own (admin 3, operator 2, auditor 1; 0 for anything else).
func (r Role) Rank() int {
	switch r {
	case RoleAdmin:
		return 3
	case RoleOperator:
		return 2
	case RoleAuditor:
		return 1
	}
	return 0
}
