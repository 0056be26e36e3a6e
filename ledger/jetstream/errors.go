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

var (
	// ErrConfigConflict is returned (inside a *ConfigError naming both
	// configurations) when a stream, bucket or object store exists with
	// other replicas, storage or limits than asked for: nothing is changed.
	ErrConfigConflict = errors.New("jetstream: a resource exists with another configuration")
	// ErrMissing is returned by a read-only Open when a resource the ledger
	// needs does not exist (a read-only command creates nothing).
	ErrMissing = errors.New("jetstream: the ledger's resource does not exist")
	// ErrStartTimeout is returned by Open, Lease and Blobs when the servers
	// were still not ready when the start timeout passed.
	ErrStartTimeout = errors.New("jetstream: the NATS servers were not ready within the start timeout")
)
