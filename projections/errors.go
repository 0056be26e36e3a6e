package projections

import (
	"errors"
	"fmt"
	"taskledger/events"
)

var (
	// ErrInvariant is wrapped by every apply error: the event is not allowed
	// by the state machine or breaks an invariant of domain.md.
	ErrInvariant = errors.New("projections: invariant violated")
	// ErrUnknownEvent is returned for an event type or schema without decoder.
	ErrUnknownEvent = events.ErrUnknownEvent
)

// ApplyError names the seq of the event that could not be applied.
type ApplyError struct {
	Seq  uint64
	Type events.Type
	Err  error
}

func (e *ApplyError) Error() string {
	return fmt.Sprintf("seq %d (%s): %v", e.Seq, e.Type, e.Err)
}

func (e *ApplyError) Unwrap() error { return e.Err }

func violation(format string, args ...any) error {
	return fmt.Errorf("%w: %s", ErrInvariant, fmt.Sprintf(format, args...))
}
