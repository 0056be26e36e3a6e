package ledger

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"time"

	bolt "go.etcd.io/bbolt"
	berrors "go.etcd.io/bbolt/errors"

	"taskledger/internal/failpoint"
)

// FormatVersion is the version of the file layout described in doc.go
// that this build writes. It reads every version from formatFirst on.
const FormatVersion = formatRuns

const (
	formatFirst = 1 // one stream-index key per event
	formatRuns  = 2 // a stream-index key may hold a run of seqs (putRuns)
)

// FileName is the log's file name inside the data directory.
const FileName = "taskledger.db"

var (
	bucketEvents  = []byte("events")
	bucketStreams = []byte("streams")
	bucketMeta    = []byte("meta")
	bucketAdmin   = []byte("admin")
	bucketSoft    = []byte("soft")

	keyFormat      = []byte("format")
	keyHead        = []byte("head")
	keyManualClock = []byte("manual_clock")
	keySecretCheck = []byte("secret_check")
)

// Options configure Open.
type Options struct {
	// ReadOnly opens the log for reading only (shared lock).
	ReadOnly bool
	// NoSync turns fsync off. Only benchmarks that say so use it.
	NoSync bool
	// LockTimeout bounds the wait for the file lock (default 100ms).
	LockTimeout time.Duration
}

// Store is the bbolt-backed log.
type Store struct {
	db   *bolt.DB
	path string
	// appendMu serializes Append with the update of index after commit.
	appendMu sync.Mutex
	index    streamIndex
	// broken is the first failed commit's error (guarded by appendMu):
	// every later Append returns it.
	broken error
}

// ManualClock is the persisted state of the manual test clock.
type ManualClock struct {
	Enabled bool  `msgpack:"enabled"` // the ledger was ever served with --clock=manual
	Now     int64 `msgpack:"now"`     // the manual clock's current value, Unix ms
}

// SoftRecord is a write to the soft bucket (outside the hash chain).
type SoftRecord struct {
	Key   string
	Value []byte // nil deletes
}

// Batch is what one Append writes in one transaction.
type Batch struct {
	Expected    Head     // the head the batch was decided against
	Events      []*Event // sealed events continuing Expected
	Soft        []SoftRecord
	ManualClock *ManualClock // when set, replaces the stored manual clock
	SecretCheck []byte       // when set, stored as the key-check value
	// Encoded, when it has one entry per event, holds each event's stored
	// encoding from SealEncoded; otherwise Append encodes the events.
	Encoded [][]byte
	// ReadModel are the writes of the on-disk read model (readmodel.go)
	// that this batch's events make, in its transaction. Engines that keep
	// no read model (jetstream) ignore them.
	ReadModel []ReadModelWrite
}

// Open opens (creating if needed) the log in dir.
func Open(dir string, opt Options) (*Store, error) {
	if !opt.ReadOnly {
		if err := os.MkdirAll(dir, 0o700); err != nil {
			return nil, fmt.Errorf("ledger: create data directory: %w", err)
		}
	}
	path := filepath.Join(dir, FileName)
	if opt.ReadOnly {
		if _, err := os.Stat(path); err != nil {
			return nil, fmt.Errorf("ledger: no ledger in %s: %w", dir, ErrNotFound)
		}
	}
	if err := CheckFile(path); err != nil {
		return nil, err
	}
	timeout := opt.LockTimeout
	if timeout == 0 {
		timeout = 100 * time.Millisecond
	}
	db, err := bolt.Open(path, 0o600, &bolt.Options{
		Timeout:        timeout,
		ReadOnly:       opt.ReadOnly,
		NoSync:         opt.NoSync,
		NoFreelistSync: false,
	})
	if err != nil {
		if errors.Is(err, berrors.ErrTimeout) {
			return nil, ErrInUse
		}
		return nil, fmt.Errorf("ledger: open %s: %w", FileName, err)
	}
	s := &Store{db: db, path: path}
	if opt.ReadOnly {
		if err := s.checkFormat(); err != nil {
			db.Close()
			return nil, err
		}
		if err := s.index.load(db); err != nil {
			db.Close()
			return nil, err
		}
		return s, nil
	}
	err = initBuckets(db)
	if err == nil {
		err = s.checkFormat()
	}
	if err == nil {
		err = s.index.load(db)
	}
	if err != nil {
		db.Close()
		return nil, err
	}
	return s, nil
}

// initBuckets creates the buckets, the format version and the genesis head
// of a new ledger file; a file that has them all is left untouched, so
// opening an existing ledger changes no byte.
func initBuckets(db *bolt.DB) error {
	initialized := false
	_ = db.View(func(tx *bolt.Tx) error {
		initialized = true
		for _, b := range [][]byte{bucketEvents, bucketStreams, bucketMeta, bucketAdmin, bucketSoft} {
			initialized = initialized && tx.Bucket(b) != nil
		}
		return nil
	})
	if initialized {
		return nil
	}
	return db.Update(func(tx *bolt.Tx) error {
		for _, b := range [][]byte{bucketEvents, bucketStreams, bucketMeta, bucketAdmin, bucketSoft} {
			if _, err := tx.CreateBucketIfNotExists(b); err != nil {
				return err
			}
		}
		meta := tx.Bucket(bucketMeta)
		if meta.Get(keyFormat) == nil {
			if err := meta.Put(keyFormat, u64(FormatVersion)); err != nil {
				return err
			}
			hb, err := Marshal(GenesisHead())
			if err != nil {
				return err
			}
			return meta.Put(keyHead, hb)
		}
		return nil
	})
}

func (s *Store) checkFormat() error {
	return s.db.View(func(tx *bolt.Tx) error {
		meta := tx.Bucket(bucketMeta)
		if meta == nil {
			return fmt.Errorf("%w: no meta bucket", ErrFormat)
		}
		v := meta.Get(keyFormat)
		if len(v) != 8 || binary.BigEndian.Uint64(v) < formatFirst || binary.BigEndian.Uint64(v) > FormatVersion {
			return fmt.Errorf("%w: want version %d to %d", ErrFormat, formatFirst, FormatVersion)
		}
		return nil
	})
}

// upgradeFormat records, in tx, that the file now holds what version
// introduced (a no-op when it is at that version or later). Opening a
// file changes no byte; the first write that needs the newer layout moves
// the version with it, so an older binary refuses the file rather than
// misreading it.
func upgradeFormat(tx *bolt.Tx, version uint64) error {
	meta := tx.Bucket(bucketMeta)
	if v := meta.Get(keyFormat); len(v) == 8 && binary.BigEndian.Uint64(v) >= version {
		return nil
	}
	return meta.Put(keyFormat, u64(version))
}

// Exists reports whether dir holds a ledger file.
func Exists(dir string) bool {
	_, err := os.Stat(filepath.Join(dir, FileName))
	return err == nil
}

// Path is the file's path.
func (s *Store) Path() string { return s.path }

// WriteStats are a store's write transactions' figures since it opened,
// summed over every commit (bbolt's): the time spent spilling the changed
// nodes into pages, the time spent writing them (the pages' writes and
// both fdatasyncs of each commit: the pages', then the meta page's), and
// the page writes (one per page, or per node that overflows into several,
// and one for the meta page). The difference between two readings around
// one Append is that commit's, when nothing else wrote meanwhile.
type WriteStats struct {
	Spill, Write time.Duration
	Writes       int64
}

// WriteStats returns the store's write figures so far.
func (s *Store) WriteStats() WriteStats {
	st := s.db.Stats().TxStats
	return WriteStats{Spill: st.GetSpillTime(), Write: st.GetWriteTime(), Writes: st.GetWrite()}
}

// Close closes the file and releases the lock.
func (s *Store) Close() error { return s.db.Close() }

func u64(v uint64) []byte {
	b := make([]byte, 8)
	binary.BigEndian.PutUint64(b, v)
	return b
}

func streamKey(stream string, version uint64) []byte {
	k := make([]byte, 0, len(stream)+9)
	k = append(k, stream...)
	k = append(k, 0)
	return append(k, u64(version)...)
}

// Head returns the committed head.
func (s *Store) Head() (Head, error) {
	var h Head
	err := s.db.View(func(tx *bolt.Tx) error {
		var err error
		h, err = readHead(tx)
		return err
	})
	return h, err
}

func readHead(tx *bolt.Tx) (Head, error) {
	var h Head
	v := tx.Bucket(bucketMeta).Get(keyHead)
	if v == nil {
		return h, fmt.Errorf("%w: no head", ErrCorrupt)
	}
	if err := Unmarshal(v, &h); err != nil {
		return h, fmt.Errorf("%w: head: %v", ErrCorrupt, err)
	}
	return h, nil
}

// Append writes a batch in one transaction (one fsync). It refuses a batch
// decided against another head, or whose events do not continue it, and
// writes nothing then. When the commit itself fails (a write or fdatasync
// of the file), it returns ErrCommitIO, and so does every later Append:
// the file's state is unknown until it is opened again.
func (s *Store) Append(b *Batch) error {
	s.appendMu.Lock()
	defer s.appendMu.Unlock()
	if s.broken != nil {
		return s.broken
	}
	err := s.appendLocked(b)
	if errors.Is(err, ErrCommitIO) {
		s.broken = err
	}
	return err
}

// appendLocked is Append's transaction (appendMu held).
func (s *Store) appendLocked(b *Batch) error {
	var index indexState
	err := s.update(func(tx *bolt.Tx) error {
		head, err := readHead(tx)
		if err != nil {
			return err
		}
		if head.Seq != b.Expected.Seq || !bytes.Equal(head.Hash, b.Expected.Hash) {
			return fmt.Errorf("%w: head is %d, batch expects %d", ErrHeadMoved, head.Seq, b.Expected.Seq)
		}
		events := tx.Bucket(bucketEvents)
		events.FillPercent = 1.0
		for i, e := range b.Events {
			if e.Seq != head.Seq+1 || !bytes.Equal(e.PrevHash, head.Hash) {
				return fmt.Errorf("%w: event seq %d after head %d", ErrBadBatch, e.Seq, head.Seq)
			}
			var v []byte
			if len(b.Encoded) == len(b.Events) {
				v = b.Encoded[i]
			} else if v, err = Marshal(e); err != nil {
				return fmt.Errorf("ledger: encode seq %d: %w", e.Seq, err)
			}
			if err := events.Put(u64(e.Seq), v); err != nil {
				return err
			}
			head = Head{Seq: e.Seq, Hash: e.Hash, At: e.At}
		}
		meta := tx.Bucket(bucketMeta)
		if len(b.Events) > 0 {
			hb, err := Marshal(head)
			if err != nil {
				return err
			}
			if err := meta.Put(keyHead, hb); err != nil {
				return err
			}
			if index, err = s.index.write(tx, b, head); err != nil {
				return err
			}
		}
		if b.ManualClock != nil {
			mb, err := Marshal(b.ManualClock)
			if err != nil {
				return err
			}
			if err := meta.Put(keyManualClock, mb); err != nil {
				return err
			}
		}
		if b.SecretCheck != nil {
			if err := meta.Put(keySecretCheck, b.SecretCheck); err != nil {
				return err
			}
		}
		if len(b.ReadModel) > 0 {
			if err := writeReadModel(tx, false, b.ReadModel); err != nil {
				return err
			}
		}
		soft := tx.Bucket(bucketSoft)
		for _, r := range b.Soft {
			var err error
			if r.Value == nil {
				err = soft.Delete([]byte(r.Key))
			} else {
				err = soft.Put([]byte(r.Key), r.Value)
			}
			if err != nil {
				return err
			}
		}
		return nil
	})
	if err == nil && len(b.Events) > 0 {
		s.index.set(index)
	}
	return err
}

// write runs fn in a writable transaction outside Append (admin tokens,
// checkpoints): refused once a commit failed, and a failed commit of its
// own breaks the store as Append's does.
func (s *Store) write(fn func(tx *bolt.Tx) error) error {
	s.appendMu.Lock()
	defer s.appendMu.Unlock()
	if s.broken != nil {
		return s.broken
	}
	err := s.update(fn)
	if errors.Is(err, ErrCommitIO) {
		s.broken = err
	}
	return err
}

// update runs fn in a writable transaction and commits it, like bolt's
// Update, telling a failed commit (ErrCommitIO) from an error of fn (the
// transaction rolled back, nothing written).
func (s *Store) update(fn func(tx *bolt.Tx) error) error {
	tx, err := s.db.Begin(true)
	if err != nil {
		return err
	}
	if err := fn(tx); err != nil {
		_ = tx.Rollback()
		return err
	}
	if err := failpoint.Eval(failpoint.CommitWrite); err != nil {
		_ = tx.Rollback()
		return fmt.Errorf("%w: %w", ErrCommitIO, err)
	}
	if err := tx.Commit(); err != nil {
		return fmt.Errorf("%w: %w", ErrCommitIO, err)
	}
	if err := failpoint.Eval(failpoint.CommitSync); err != nil {
		return fmt.Errorf("%w: %w", ErrCommitIO, err)
	}
	return nil
}

// Range calls fn for every committed event with seq > after, in order,
// until fn returns an error (returned) or ErrStop (ends quietly).
func (s *Store) Range(after uint64, fn func(*Event) error) error {
	var in interner // types, actors and scopes repeat: shared, not allocated
	return s.RangeRaw(after, func(seq uint64, raw []byte) error {
		e, err := decodeEvent(raw, &in)
		if err != nil {
			return fmt.Errorf("seq %d: %w", seq, err)
		}
		return fn(&e)
	})
}

// RangeTransient is Range for a fold that keeps nothing of an event but
// copies of its values (replay): the *Event and its Idem are reused from
// one call to the next, and its Body and PrevHash are the stored bytes
// themselves, so all of them are valid only during the call. (Hash,
// Stream, the actor and the idempotency key and fingerprint are copies,
// as Range gives them.)
func (s *Store) RangeTransient(after uint64, fn func(*Event) error) error {
	return rangeTransient(s.RangeRaw, after, fn)
}

// ErrStop ends a Range early without an error.
var ErrStop = errors.New("ledger: stop")

// RangeRaw calls fn with the stored bytes of every event with seq > after.
// The bytes are only valid during the call.
func (s *Store) RangeRaw(after uint64, fn func(seq uint64, raw []byte) error) error {
	err := s.db.View(func(tx *bolt.Tx) error {
		c := tx.Bucket(bucketEvents).Cursor()
		for k, v := c.Seek(u64(after + 1)); k != nil; k, v = c.Next() {
			if len(k) != 8 {
				return fmt.Errorf("%w: key of length %d", ErrCorrupt, len(k))
			}
			if err := fn(binary.BigEndian.Uint64(k), v); err != nil {
				return err
			}
		}
		return nil
	})
	if errors.Is(err, ErrStop) {
		return nil
	}
	return err
}

// StreamStart returns the seq of the first event of stream (0 when the
// log has none): a task's creation seq from its id, which keys its
// document in the read model (D466). It reads the stream index (the
// bucket's first entry of the stream, or the entries not in it yet).
func (s *Store) StreamStart(stream string) (uint64, error) {
	tail := s.index.tail(stream) // before the View: see streamindex.go
	var first uint64
	err := s.db.View(func(tx *bolt.Tx) error {
		prefix := append([]byte(stream), 0)
		k, v := tx.Bucket(bucketStreams).Cursor().Seek(prefix)
		if k != nil && bytes.HasPrefix(k, prefix) && len(k) == len(prefix)+8 {
			if len(v) == 0 || len(v)%8 != 0 {
				return fmt.Errorf("%w: stream %s index entry of %d bytes", ErrCorrupt, stream, len(v))
			}
			first = binary.BigEndian.Uint64(v[:8])
		}
		return nil
	})
	for _, seq := range tail {
		if first == 0 || seq < first {
			first = seq
		}
	}
	return first, err
}

// Stream calls fn for every event of stream, in stream order.
func (s *Store) Stream(stream string, fn func(*Event) error) error {
	tail := s.index.tail(stream) // before the View: see streamindex.go
	err := s.db.View(func(tx *bolt.Tx) error {
		events := tx.Bucket(bucketEvents)
		emit := func(seq []byte) error {
			raw := events.Get(seq)
			if raw == nil {
				return fmt.Errorf("%w: stream %s points at missing seq %d", ErrCorrupt, stream, binary.BigEndian.Uint64(seq))
			}
			e, err := DecodeEvent(raw)
			if err != nil {
				return err
			}
			return fn(&e)
		}
		c := tx.Bucket(bucketStreams).Cursor()
		prefix := append([]byte(stream), 0)
		var last uint64 // the stream's newest seq read from the bucket
		for k, v := c.Seek(prefix); k != nil && bytes.HasPrefix(k, prefix) && len(k) == len(prefix)+8; k, v = c.Next() {
			if len(v) == 0 || len(v)%8 != 0 {
				return fmt.Errorf("%w: stream %s index entry of %d bytes", ErrCorrupt, stream, len(v))
			}
			for ; len(v) > 0; v = v[8:] {
				// A stream's seqs grow with its versions. One already read
				// is an entry written twice: a pass cut short (one key per
				// event) and written again as runs.
				if seq := binary.BigEndian.Uint64(v[:8]); seq > last {
					last = seq
					if err := emit(v[:8]); err != nil {
						return err
					}
				}
			}
		}
		// The entries not in the bucket yet; those a pass moved into it
		// (all of them, or the first chunks of one under way) were read
		// above, and a stream's seqs grow with its versions.
		indexed := max(indexedThrough(tx), last)
		for _, seq := range tail {
			if seq > indexed {
				if err := emit(u64(seq)); err != nil {
					return err
				}
			}
		}
		return nil
	})
	if errors.Is(err, ErrStop) {
		return nil
	}
	return err
}

// ManualClock returns the stored manual clock state (zero if none).
func (s *Store) ManualClock() (ManualClock, error) {
	var mc ManualClock
	err := s.db.View(func(tx *bolt.Tx) error {
		v := tx.Bucket(bucketMeta).Get(keyManualClock)
		if v == nil {
			return nil
		}
		return Unmarshal(v, &mc)
	})
	return mc, err
}

// SecretCheck returns the stored key-check value of the claim-token secret.
func (s *Store) SecretCheck() ([]byte, error) {
	var out []byte
	err := s.db.View(func(tx *bolt.Tx) error {
		out = append([]byte(nil), tx.Bucket(bucketMeta).Get(keySecretCheck)...)
		return nil
	})
	if len(out) == 0 {
		out = nil
	}
	return out, err
}

// SoftRecords calls fn for every soft record whose key starts with prefix.
func (s *Store) SoftRecords(prefix string, fn func(key string, value []byte) error) error {
	return s.db.View(func(tx *bolt.Tx) error {
		c := tx.Bucket(bucketSoft).Cursor()
		p := []byte(prefix)
		for k, v := c.Seek(p); k != nil && bytes.HasPrefix(k, p); k, v = c.Next() {
			if err := fn(string(k), append([]byte(nil), v...)); err != nil {
				return err
			}
		}
		return nil
	})
}

// PutAdminToken stores (or replaces) an admin token's hash under name.
func (s *Store) PutAdminToken(name string, hash []byte) error {
	return s.write(func(tx *bolt.Tx) error {
		return tx.Bucket(bucketAdmin).Put([]byte(name), hash)
	})
}

// DeleteAdminToken removes an admin token; ErrNotFound if there is none.
func (s *Store) DeleteAdminToken(name string) error {
	return s.write(func(tx *bolt.Tx) error {
		b := tx.Bucket(bucketAdmin)
		if b.Get([]byte(name)) == nil {
			return ErrNotFound
		}
		return b.Delete([]byte(name))
	})
}

// AdminTokens returns every admin token name with its hash.
func (s *Store) AdminTokens() (map[string][]byte, error) {
	out := map[string][]byte{}
	err := s.db.View(func(tx *bolt.Tx) error {
		return tx.Bucket(bucketAdmin).ForEach(func(k, v []byte) error {
			out[string(k)] = append([]byte(nil), v...)
			return nil
		})
	})
	return out, err
}

// Check runs bbolt's own consistency check, after checking that both
// meta pages are valid (naming a damaged one: bbolt's check would assert
// on it).
func (s *Store) Check() error {
	if err := checkMetaPages(s.path); err != nil {
		return fmt.Errorf("ledger: bbolt check: %w", err)
	}
	return s.db.View(func(tx *bolt.Tx) error {
		var first error
		for err := range tx.Check() { // drain: the checker goroutine must finish
			if first == nil {
				first = fmt.Errorf("ledger: bbolt check: %w", err)
			}
		}
		return first
	})
}

// rangeTransient decodes the raw events rangeRaw gives into one Event,
// reused from one call of fn to the next (see Store.RangeTransient).
func rangeTransient(rangeRaw func(uint64, func(uint64, []byte) error) error, after uint64, fn func(*Event) error) error {
	d := NewTransientDecoder()
	return rangeRaw(after, func(seq uint64, raw []byte) error {
		e, err := d.Decode(raw)
		if err != nil {
			return fmt.Errorf("seq %d: %w", seq, err)
		}
		return fn(e)
	})
}

// TransientDecoder decodes stored events as RangeTransient lends them:
// the event, its Body, PrevHash and Idem are valid only until the next
// Decode, and only while raw is (Hash is a copy). A start's chain check
// reads every event this way.
type TransientDecoder struct {
	in interner
	e  Event
}

// NewTransientDecoder returns a decoder for one pass over the log.
func NewTransientDecoder() *TransientDecoder {
	return &TransientDecoder{in: interner{transient: true}}
}

// Decode decodes raw into the decoder's event.
func (d *TransientDecoder) Decode(raw []byte) (*Event, error) {
	d.e = Event{}
	if !decodeEventFast(raw, &d.e, &d.in) {
		var err error
		if d.e, err = decodeEventGeneric(raw); err != nil {
			return nil, err
		}
	}
	return &d.e, nil
}
