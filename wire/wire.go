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
