package localstate

import "errors"

var (
	// ErrInUse means another process holds the state's file lock.
	ErrInUse = errors.New("localstate: state is in use by another agent")
	// ErrCorrupt means the state file or one of its records cannot be read.
	ErrCorrupt = errors.New("localstate: state is damaged")
	// ErrNotEnrolled means the state has no identity yet.
	ErrNotEnrolled = errors.New("localstate: not enrolled (run `taskledger agent enroll`)")
	// ErrPendingExists means a request is already pending; it must be
	// resolved (replayed to a definitive answer) before another is begun.
	ErrPendingExists = errors.New("localstate: another request is pending")
	// ErrIdentityLocked means the identity cannot change while a claim, a
	// pending request or a task needing a person exists.
	ErrIdentityLocked = errors.New("localstate: identity cannot change while a claim, a pending request or a task needing a person exists")
	// ErrNotFound means no such entry exists.
	ErrNotFound = errors.New("localstate: not found")
)
