// Package jetstream is the ledger on a NATS JetStream stream: a
// ledger.Backend that several processes may open, replicated by the NATS
// cluster (R3 on three servers).
//
// # Layout
//
// With the name prefix NAME (default TASKLEDGER):
//
//	NAME_EVENTS  stream on subject name.events: file storage, deny delete,
//	             deny purge, no limits, discard new. One message per
//	             committed batch; its body is the format byte 0x01, then
//	             each event's stored envelope (exactly the bytes the bbolt
//	             ledger stores under its seq, see ledger/doc.go) prefixed by
//	             its length as an unsigned varint. Header Taskledger-Seqs:
//	             "FIRST-LAST", the ledger seqs it holds (informative).
//	NAME_SOFT    key-value bucket (history 1): the soft records.
//	NAME_META    key-value bucket (history 1): "manual_clock" (msgpack
//	             ManualClock), "secret_check", "admin.<name>" (token hash).
//	NAME_LEASE   key-value bucket (history 1, max age = the lease TTL):
//	             "sequencer", JSON {"id", "url"} of the lease holder
//	             (lease.go; created by the first node that serves).
//	NAME_BLOBS   object store: blobs named by their SHA-256 (blobs.go).
//
// The buckets are streams KV_NAME_SOFT, ... created with direct gets off
// (every read goes through the stream's leader); the object store is the
// stream OBJ_NAME_BLOBS.
//
// # Binding and creating (resources.go, start.go)
//
// Open binds each resource that exists when its replicas, storage (and,
// for a bucket, history and TTL) are the ones asked for, and otherwise
// fails with a *ConfigError naming both: it never updates a resource. A
// missing resource is created unless Config.ReadOnly (then ErrMissing);
// two processes creating the same resource at once both end up bound to
// it (create-or-bind). Without Config.Replicas a creating Open asks for
// DefaultReplicas(ClusterSize): 3 on three or more servers. With
// Config.StartTimeout, transient failures (no server, no responders, no
// leader yet, deadlines) are retried with backoff until the start deadline.
//
// Ledger keys become bucket keys one to one: letters, digits, '-', '_'
// and '/' stay, every other byte is '=' and two hex digits.
//
// # Sequences
//
// The ledger's seq is the event's own (in its envelope, covered by the hash
// chain), dense from 1 as with bbolt. The JetStream sequence numbers
// batches, not events: message k holds the k-th committed batch. A batch
// decided at head H is published with Nats-Expected-Last-Sequence = the
// JetStream sequence of the message that holds H (0 for the genesis), so
// a writer whose view is stale is refused by the stream itself, and
// Append reports ledger.ErrHeadMoved.
//
// Appends pipeline (Start, pipelined.go): batch N+1 is published while
// N's acknowledgement is in flight, expecting the JetStream sequence N
// will get and N's message id (Nats-Msg-Id: the hex of N's last event's
// hash), so it is stored only right after N, never after another
// writer's message stored in N's place. When N fails, every batch
// started after it fails too (ErrPipelineBroken) and writes nothing
// more; the waits are called in order.
//
// # What is atomic
//
// The message is the commit point: a batch's events are stored all or not
// at all. Soft records and meta changes are written to their buckets after
// the message is stored (a batch's soft records are published together and
// their acknowledgements awaited together); they are outside the hash
// chain (as with bbolt),
// and an Append that fails after the message reports an error, so the
// commands of that batch are answered 503 although their events are in
// the log (a retry with the same idempotency key replays them).
//
// # Reading
//
// Open reads every message once and keeps, in memory, where each batch's
// events are (JetStream sequence, first and last seq) and each stream's
// seqs; reads fetch the messages they need (direct get). Before a read,
// the messages other writers appended are read and checked to continue
// the head densely and by prev_hash.
package jetstream
