package events

import "errors"

// ErrUnknownEvent: an event type, or a schema of it, this build cannot
// decode. projections.ErrUnknownEvent is the same value.
var ErrUnknownEvent = errors.New("projections: unknown event type or schema")
