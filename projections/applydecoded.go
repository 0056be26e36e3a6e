package projections

import (
	"fmt"
	"reflect"

	"taskledger/events"
	"taskledger/ledger"
)

// ApplyDecoded is Apply for an event whose body the caller already holds
// as the value DecodeBody(e.Type, e.Schema, e.Body) returns: the
// sequencer, which built the body, encoded it into e.Body and would
// otherwise decode it again at once. The result is exactly Apply's (every
// test's cleanup compares live projections with a replay of the log, which
// decodes); body must be a pointer to the event type's current body type,
// and the caller must not change it afterwards (the fold may keep its
// slices).
func (s *State) ApplyDecoded(e *ledger.Event, body any) error {
	if err := s.follows(e); err != nil {
		return err
	}
	if t, ok := events.BodyType(e.Type); !ok || reflect.TypeOf(body) != t || e.Schema != events.CurrentSchema(e.Type) {
		return &ApplyError{Seq: e.Seq, Type: e.Type, Err: fmt.Errorf("%w: %T as %s schema %d", events.ErrUnknownEvent, body, e.Type, e.Schema)}
	}
	return s.applyDecoded(e, body)
}

// isStream reports whether stream is prefix+id (TaskStream, DeviceStream)
// without building that string.
func isStream(stream, prefix, id string) bool {
	return len(stream) == len(prefix)+len(id) && stream[:len(prefix)] == prefix && stream[len(prefix):] == id
}
