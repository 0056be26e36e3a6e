// Package backup writes and checks taskledger's backup archive: a
// consistent copy of a serving ledger that restores on another machine and
// proves itself intact there.
//
// # Format
//
// A backup is one POSIX tar (ustar) file whose entries come in this order:
//
//	taskledger.db        the bbolt log as of one read transaction
//	                     (ledger.View.WriteTo): events, stream index, meta,
//	                     admin token hashes, soft records, stored checkpoints
//	blobs/<sha256>       every blob an event of that log references (reference
//	                     images, evidence, replaced images too), by name order
//	checkpoint-key       the data directory's checkpoint signing key (the
//	                     restored server keeps signing as the same log)
//	manifest.json        the Manifest, last: it names the hashes of what
//	                     came before it
//
// The manifest's checkpoint is signed at the copy's head: its size is the
// head seq and its root the Merkle root of the copy's events, so the copy
// is covered by a signature of the log's own key. Snapshots are not in the
// archive: the restored server replays the whole log at its first start
// (and writes a snapshot after --snapshot-every events, or at once with
// `taskledger snapshot create`).
//
// # Restore
//
// A restore unpacks into a temporary directory beside the target, checks
// everything there (Extract, then the caller's full verify of the log, then
// CheckLog), and only then renames it into place (Install); on any failure
// the temporary directory is removed and the target is untouched.
package backup
