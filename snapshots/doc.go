// Package snapshots writes and loads projection snapshots: the canonical
// bytes of the projections (projections.State.Canonical) together with the
// log position they cover, so start-up replays only the tail of the log.
//
// # Files
//
// Snapshots live in DATA/snapshots, one file per snapshot, named
// snapshot-<seq>.tlsnap after the seq they cover (decimal, no padding).
// A file is written as snapshot-<seq>.tlsnap.tmp, fsynced, renamed to its
// final name, and the directory is fsynced: a crash leaves either the
// complete file or a .tmp file that loading skips.
//
// # Format (version 4)
//
//	magic     8 bytes  "TLSNAP\r\n"
//	hlen      4 bytes  big-endian length of the header
//	header    hlen bytes, msgpack Header: format, seq, hash and at of the
//	          covered head, projection schema version, projection config,
//	          claim-token key-check value, content length
//	content   the projections' canonical bytes (their binary encoding,
//	          projections/content.go; version 1 held msgpack)
//	checksum  4 bytes CRC-32C (Castagnoli, big-endian) over every byte
//	          before it (versions 1 and 2: 32 bytes SHA-256)
//
// # Trust
//
// A snapshot is never trusted blindly. Loading refuses (and reports) a
// file whose magic is not ours (foreign), whose checksum does not match
// (corrupt or edited by hand), of another format, of another projection
// schema version or configuration, whose seq is beyond the log's head, or
// whose hash is not the hash of the event at its seq in the log. The
// newest snapshot that passes every check is used; the log stays the only
// truth, so with none the projections are rebuilt from the whole log.
// The checksum detects damage and edits that did not recompute it; it is
// no seal against someone who can write the data directory (and could
// rewrite the log as well), which is why a cheap CRC does the job: what
// anchors a snapshot is its covered hash in the log, and verify's check
// that snapshot + tail equals a full replay.
//
// The key-check value records that the server-issued claims the snapshot
// covers were verified under the claim-token secret with that key-check
// value; start-up then recomputes only the server-issued claims after the
// snapshot's seq when the secret has the same key-check value.
package snapshots
