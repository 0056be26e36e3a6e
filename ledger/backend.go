package ledger

// Backend is the log as the node uses it, whatever engine holds it: the
// bbolt file (*Store, the embedded default) or a replicated stream
// (ledger/jetstream). Every implementation passes the conformance suite in
// ledger/ledgertest.
//
// The contract:
//   - Append writes a Batch atomically or not at all. It refuses, with
//     ErrHeadMoved and nothing written, a batch whose Expected head is not
//     the log's head (another writer appended first: the sequence check),
//     and, with ErrBadBatch, one whose events do not continue Expected
//     densely and chain from its hash. Of several appenders racing at the
//     same head, exactly one wins.
//   - Head is the newest committed event's (seq, hash, at); GenesisHead
//     for an empty log.
//   - Range and RangeRaw visit every committed event with seq > after, in
//     seq order; ErrStop from fn ends them quietly. The bytes RangeRaw
//     passes are the stored envelope (the same bytes on every backend) and
//     are valid only during the call.
//   - Stream visits one stream's events in stream-version order.
//   - Soft records (outside the hash chain), the manual clock, the
//     claim-token secret's key-check value and the admin tokens are the
//     records beside the chain the node loads at start.
type Backend interface {
	Append(b *Batch) error
	Head() (Head, error)
	Range(after uint64, fn func(*Event) error) error
	RangeRaw(after uint64, fn func(seq uint64, raw []byte) error) error
	Stream(stream string, fn func(*Event) error) error
	SoftRecords(prefix string, fn func(key string, value []byte) error) error
	ManualClock() (ManualClock, error)
	SecretCheck() ([]byte, error)
	PutAdminToken(name string, hash []byte) error
	DeleteAdminToken(name string) error
	AdminTokens() (map[string][]byte, error)
	Close() error
}

var _ Backend = (*Store)(nil)

// BlobStore is the content-addressed store beside the log (reference
// images, evidence): Put stores data durably and returns its SHA-256 in
// lower-case hex, the same name for the same content; Get returns the
// content named so, ErrNotFound for a name it does not hold (or one that is
// not 64 lower-case hex digits), and never content that does not hash to
// its name (ErrBlobDamaged).
type BlobStore interface {
	Put(data []byte) (string, error)
	Get(sha string) ([]byte, error)
}

var _ BlobStore = (*Blobs)(nil)

// IsBlobName reports whether name is a blob's name (64 lower-case hex).
func IsBlobName(name string) bool { return blobName.MatchString(name) }

// CheckBlobContent returns ErrBlobDamaged when data does not hash to sha.
func CheckBlobContent(sha string, data []byte) error { return checkBlob(sha, data) }
