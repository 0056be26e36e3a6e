package snapshots

import "errors"

var (
	// ErrForeign is returned for a file that is not a taskledger snapshot.
	ErrForeign = errors.New("snapshots: not a taskledger snapshot")
	// ErrChecksum is returned when a snapshot's checksum does not match its
	// content (a torn write, a flipped bit, or an edit by hand).
	ErrChecksum = errors.New("snapshots: checksum mismatch (corrupt or edited)")
	// ErrFormat is returned for a snapshot file of another format version
	// or with an inconsistent header.
	ErrFormat = errors.New("snapshots: unsupported snapshot format")
	// ErrSchema is returned for a snapshot of another projection schema
	// version or projection configuration: projections must be rebuilt.
	ErrSchema = errors.New("snapshots: snapshot of another projection schema or configuration")
	// ErrBeyondHead is returned for a snapshot that covers more of the log
	// than the log holds.
	ErrBeyondHead = errors.New("snapshots: snapshot is beyond the log's head")
	// ErrHashMismatch is returned when the hash a snapshot covers is not the
	// hash of the event at its seq in the log.
	ErrHashMismatch = errors.New("snapshots: snapshot does not match the log at its seq")
)
