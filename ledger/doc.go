// Package ledger is taskledger's append-only event log.
//
// # File format
//
// One bbolt file (taskledger.db) holds these buckets:
//
//	events     key: big-endian uint64 seq; value: msgpack Event envelope
//	           (fill percent 1.0: keys only ever grow)
//	streams    key: stream name, 0x00, big-endian uint64 stream version;
//	           value: a run of big-endian uint64 seqs, the stream's events
//	           from that version on, in order (format 1: one seq per key;
//	           format 2: a pass writes one run per stream; a seq read
//	           twice — a pass cut short and written again — is skipped).
//	           Reads by stream and a task's creation seq. Complete
//	           through meta "streams_indexed" (through the head when that
//	           key is absent); the entries of later events are rebuilt in
//	           memory from the events at open and written in a sorted
//	           pass once a few thousand are pending (sorted by a goroutine,
//	           off the commit), a chunk of the pass
//	           per commit in key order; "streams_indexed" moves with the
//	           pass's last chunk, so the bucket may also hold entries of
//	           later events (a pass under way), which Stream reads once
//	           (streamindex.go)
//	meta       "format" → format version (1 or 2: the first run of more
//	           than one seq moves a file of format 1 to 2 in its commit;
//	           opening changes no byte); "head" → msgpack Head;
//	           "streams_indexed" → big-endian uint64 seq;
//	           "manual_clock" → msgpack ManualClock;
//	           "secret_check" → key-check value of the claim-token secret
//	admin      key: admin token name; value: SHA-256 of the token
//	soft       key: soft-record kind + "/" + id; value: opaque msgpack
//	           (device presence, recorded "no task" outcomes). Soft
//	           records are outside the hash chain and never replayed.
//
// # Envelope and hash chain
//
// An Event is encoded with msgpack (struct fields in declaration order,
// compact integers, sorted map keys). Its hash is
//
//	SHA-256( prev_hash || msgpack(event with Hash = nil) )
//
// and prev_hash is the hash of the event before it (32 zero bytes for
// seq 1). The body is a msgpack document of its own, kept as raw bytes in
// the envelope, so the envelope hashes exactly what was written.
//
// # Writing
//
// Only the sequencer writes. Append takes a Batch that names the head it
// was decided against; the batch's events must continue that head densely
// and chain from its hash, otherwise nothing is written. The whole batch is
// one bbolt transaction: one fsync.
package ledger
