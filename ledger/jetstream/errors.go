package jetstream

import "errors"

var (
	// ErrBatchTooLarge is returned by Append when a batch's message would
	// exceed the server's max_payload (raise it in the NATS configuration:
	// one batch is one message).
	ErrBatchTooLarge = errors.New("jetstream: batch exceeds the server's max_payload")
	// ErrStreamConfig is returned by Open when the events stream exists
	// with a configuration that would let events be deleted or lost.
	ErrStreamConfig = errors.New("jetstream: the events stream is not configured as the ledger needs")
	// ErrMessage is returned when a stored batch message cannot be read as
	// one: wrong format byte, torn envelope, or events that do not continue
	// the message before it.
	ErrMessage = errors.New("jetstream: stored batch message is corrupt")
)
