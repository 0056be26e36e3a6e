package ledger

import "errors"

var (
	// ErrHeadMoved is returned by Append when the batch was decided against a
	// head that is no longer the log's head.
	ErrHeadMoved = errors.New("ledger: expected sequence does not match")
	// ErrBadBatch is returned by Append when the batch's events do not
	// continue the expected head densely or do not chain from its hash.
	ErrBadBatch = errors.New("ledger: batch does not continue the head")
	// ErrCommitIO is returned by Append when the commit's write or sync of
	// the file failed (EIO, ENOSPC, …), and by every Append after that one:
	// what the file holds is unknown until it is opened again (a failed
	// fdatasync may leave the batch in the page cache, readable, and then
	// lose it). The server stops and restarts on it (fail-stop).
	ErrCommitIO = errors.New("ledger: the log's commit could not be written or synced")
	// ErrInUse is returned by Open when another process holds the ledger.
	ErrInUse = errors.New("ledger: the ledger is in use by another process (stop the server first)")
	// ErrNotFound is returned when an event, stream or record does not exist.
	ErrNotFound = errors.New("ledger: not found")
	// ErrCorrupt is returned when stored bytes cannot be decoded.
	ErrCorrupt = errors.New("ledger: stored data is corrupt")
	// ErrFormat is returned by Open for a file of another format version.
	ErrFormat = errors.New("ledger: unsupported ledger format")
	// ErrClosed is returned after Close.
	ErrClosed = errors.New("ledger: closed")
)
