// Package transparency joins the Merkle tree over the log, the checkpoint
// key and the stored checkpoints into what a running node serves: the
// latest signed checkpoint, checkpoints by size, and inclusion and
// consistency proofs.
package transparency

import (
	"bytes"
	"errors"
	"fmt"
	"math"
	"sync"
	"time"

	"github.com/rs/zerolog"

	"taskledger/audit/checkpoint"
	"taskledger/audit/merkle"
	"taskledger/ledger"
)

// MinInterval is the least time between two checkpoints signed after
// commits (by the injected clock); snapshots sign one regardless.
const MinInterval = time.Second

// Clock is the injected clock.
type Clock interface{ Now() time.Time }

// Store is where the log's events are read and its checkpoints kept: the
// bbolt file (ledger.Store) or, on a cluster, the JetStream stream and its
// META bucket (jetstream.Log).
type Store interface {
	RangeRaw(after uint64, fn func(seq uint64, raw []byte) error) error
	Stream(stream string, fn func(*ledger.Event) error) error
	PutCheckpoint(size uint64, note []byte) error
	Checkpoint(size uint64) ([]byte, error)
	LatestCheckpoint() (uint64, []byte, error)
}

var _ Store = (*ledger.Store)(nil)

// Log is the tree, the key and the checkpoints of one ledger.
type Log struct {
	store  Store
	tree   *merkle.Tree
	key    *checkpoint.Key
	clock  Clock
	log    zerolog.Logger
	signer func() bool // whether this node signs now (nil: always)

	grow     sync.Mutex // one extension of the tree at a time
	mu       sync.Mutex // one signature at a time
	lastTime int64      // clock ms of the newest checkpoint signed after commits
	lastSize uint64
	kick     chan struct{}
	stop     chan struct{}
	done     chan struct{}
	once     sync.Once
}

// Build rebuilds the tree from every event of the log: a tiled tree
// (TileHeight) whose leaves are read back from store. The events are read
// with one cursor and hashed on every core (merkle.Tree.Load).
func Build(store Store) (*merkle.Tree, error) {
	return load(merkle.NewTiled(TileHeight, Leaves{Store: store}), store)
}

// BuildFull rebuilds the tree from every event of the log keeping every
// node in memory (64 bytes per event): for a log whose events cannot be
// read back by seq cheaply (a cluster's stream).
func BuildFull(store Store) (*merkle.Tree, error) { return load(merkle.New(), store) }

func load(tr *merkle.Tree, store Store) (*merkle.Tree, error) {
	err := tr.Load(func(emit func(raw []byte) error) error {
		return store.RangeRaw(0, func(_ uint64, raw []byte) error { return emit(raw) })
	})
	return tr, err
}

// Errors of the start-up check (Check).
var (
	// ErrRootMismatch is a tree rebuilt from the stored events whose root
	// is not the one the newest checkpoint signed at its size: a stored
	// byte of an event up to that size changed.
	ErrRootMismatch = errors.New("transparency: the Merkle root rebuilt from the log does not match its signed checkpoint")
	// ErrCheckpointBeyondLog is a signed checkpoint of more events than the
	// log holds.
	ErrCheckpointBeyondLog = errors.New("transparency: a signed checkpoint covers more events than the log holds")
)

// Check holds the tree rebuilt from the stored events against the newest
// stored checkpoint that opens with key, and returns its size: every
// event up to it is as signed. A checkpoint that does not open (damaged,
// or signed by a key since replaced) is logged and the next older one is
// tried; with no key, or none that opens, nothing is checked (0).
func Check(store *ledger.Store, tree *merkle.Tree, key *checkpoint.Key, log zerolog.Logger) (uint64, error) {
	if key == nil {
		return 0, nil
	}
	var cp *checkpoint.Checkpoint
	err := store.CheckpointsNewestFirst(func(size uint64, note []byte) error {
		c, err := checkpoint.Open(note, key.Verifier())
		if err == nil && c.Size == size {
			cp = c
			return ledger.ErrStop
		}
		log.Warn().Uint64("size", size).AnErr("reason", err).
			Msg("a stored checkpoint does not open with the checkpoint key; an older one is used")
		return nil
	})
	if err != nil || cp == nil {
		return 0, err
	}
	if cp.Size > tree.Size() {
		return 0, fmt.Errorf("%w: the checkpoint of size %d, the log ends at seq %d", ErrCheckpointBeyondLog,
			cp.Size, tree.Size())
	}
	root, err := tree.Root(cp.Size)
	if err != nil {
		return 0, err
	}
	if !bytes.Equal(root, cp.Root) {
		return 0, fmt.Errorf("%w of size %d", ErrRootMismatch, cp.Size)
	}
	return cp.Size, nil
}

// Open takes the tree rebuilt from the log (Build), loads (or creates)
// the key in dir and signs a checkpoint of the current size unless one is
// stored.
func Open(store *ledger.Store, tree *merkle.Tree, dir string, clock Clock, log zerolog.Logger) (*Log, error) {
	key, created, err := checkpoint.LoadOrCreateKey(dir)
	if err != nil {
		return nil, err
	}
	if created {
		log.Info().Str("origin", key.Origin()).Msg("checkpoint key created (checkpoint-key, mode 0600)")
	}
	return OpenShared(store, tree, key, clock, log, nil)
}

// OpenShared is Open for a log several nodes serve (a cluster): the key is
// given (every node holds the same), and only while signer reports true
// (the sequencer) does this node sign checkpoints; every node extends its
// tree (Committed, Followed) and serves what is stored.
func OpenShared(store Store, tree *merkle.Tree, key *checkpoint.Key, clock Clock, log zerolog.Logger, signer func() bool) (*Log, error) {
	l := &Log{store: store, tree: tree, key: key, clock: clock, log: log, signer: signer,
		kick: make(chan struct{}, 1), stop: make(chan struct{}), done: make(chan struct{})}
	if l.signs() {
		if size, _, err := store.LatestCheckpoint(); err != nil || size < tree.Size() {
			if _, err := l.Sign(); err != nil {
				return nil, err
			}
		}
	}
	go l.run()
	return l, nil
}

func (l *Log) signs() bool { return l.signer == nil || l.signer() }

// Tree is the Merkle tree.
func (l *Log) Tree() *merkle.Tree { return l.tree }

// Key is the signing key.
func (l *Log) Key() *checkpoint.Key { return l.key }

// Committed is the committer's hook: it extends the tree and asks for a
// checkpoint. It never blocks on bbolt; on a cluster, a tree that fell
// behind (the engine reloaded its projections from the stream without
// passing the events here) is first filled from the store.
// hashes, when not nil, are the leaves' hashes (LeafHash of raws); hashes
// that are not one per leaf are not used.
func (l *Log) Committed(first uint64, raws, hashes [][]byte) {
	if hashes != nil && len(hashes) != len(raws) {
		l.log.Warn().Int("hashes", len(hashes)).Int("leaves", len(raws)).Msg("merkle tree: leaf hashes are not one per leaf; the leaves are hashed again")
		hashes = nil
	}
	if err := l.extend(first, raws, hashes); err != nil {
		l.log.Error().Err(err).Msg("merkle tree append failed; checkpoints stop until restart")
		return
	}
	select {
	case l.kick <- struct{}{}:
	default:
	}
}

// LeafHash is the hash the tree gives a leaf (the engine's
// commands.Options.LeafHash, so that the hashes Committed gets are the
// tree's own).
func (l *Log) LeafHash(raw []byte) []byte { return merkle.LeafHash(raw) }

// Followed extends the tree by events a follower applied (their stored
// envelopes are re-encoded: the encoding is canonical). Events the tree
// holds already are skipped.
func (l *Log) Followed(evs []*ledger.Event) {
	if len(evs) == 0 || evs[len(evs)-1].Seq <= l.tree.Size() {
		return
	}
	raws := make([][]byte, 0, len(evs))
	first := uint64(0)
	for _, e := range evs {
		if e.Seq <= l.tree.Size() {
			continue
		}
		raw, err := ledger.Marshal(e)
		if err != nil {
			l.log.Error().Err(err).Uint64("seq", e.Seq).Msg("merkle tree: an applied event does not encode")
			return
		}
		if first == 0 {
			first = e.Seq
		}
		raws = append(raws, raw)
	}
	l.Committed(first, raws, nil)
}

func (l *Log) extend(first uint64, raws, hashes [][]byte) error {
	l.grow.Lock()
	defer l.grow.Unlock()
	if err := l.fill(first); err != nil {
		return err
	}
	size := l.tree.Size()
	if first+uint64(len(raws)) <= size+1 {
		return nil
	}
	if first <= size {
		skip := size + 1 - first
		raws, first = raws[skip:], size+1
		if hashes != nil {
			hashes = hashes[skip:]
		}
	}
	if hashes != nil {
		return l.tree.AppendHashes(first, hashes)
	}
	return l.tree.Append(first, raws)
}

// fill appends the stored events after the tree's size and before seq
// `before` (those the store holds). The caller holds grow.
func (l *Log) fill(before uint64) error {
	size := l.tree.Size()
	if before <= size+1 {
		return nil
	}
	var gap [][]byte
	err := l.store.RangeRaw(size, func(seq uint64, raw []byte) error {
		if seq >= before {
			return ledger.ErrStop
		}
		gap = append(gap, append([]byte(nil), raw...))
		return nil
	})
	if err != nil || len(gap) == 0 {
		return err
	}
	return l.tree.Append(size+1, gap)
}

// CatchUp extends the tree through the last event the store holds. The
// engine hands a batch's leaves over on its answering goroutine while the
// next batch commits (commands.Options.Leaves), so a reader that saw a
// commit in the projections or the log may find the tree a batch behind:
// whatever is asked of the tree past its size (a proof, a bundle, a
// checkpoint at a snapshot's seq, a backup) catches up first. The leaves
// handed over later are then skipped.
func (l *Log) CatchUp() error {
	l.grow.Lock()
	defer l.grow.Unlock()
	return l.fill(math.MaxUint64)
}

// ErrBeyondLog is a tree size larger than the log holds.
var ErrBeyondLog = errors.New("transparency: the tree size is beyond the log")

// Reach makes sure the tree holds size leaves, catching up from the store
// when it trails (CatchUp); ErrBeyondLog when the store holds fewer.
func (l *Log) Reach(size uint64) error {
	if size <= l.tree.Size() {
		return nil
	}
	if err := l.CatchUp(); err != nil {
		return err
	}
	if size > l.tree.Size() {
		return fmt.Errorf("%w: size %d, the log holds %d", ErrBeyondLog, size, l.tree.Size())
	}
	return nil
}

func (l *Log) run() {
	defer close(l.done)
	tick := time.NewTicker(MinInterval / 4) // retries a checkpoint held back by MinInterval
	defer tick.Stop()
	dirty := true // a node that starts (or is promoted) with an unsigned tail signs it
	for {
		select {
		case <-l.stop:
			return
		case <-l.kick:
			dirty = true
		case <-tick.C:
		}
		if dirty && l.signs() && l.due() {
			if _, err := l.Sign(); err != nil {
				l.log.Error().Err(err).Msg("signing a checkpoint failed")
			}
			dirty = false
		}
	}
}

func (l *Log) due() bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.clock.Now().UnixMilli()-l.lastTime >= MinInterval.Milliseconds() && l.tree.Size() > l.lastSize
}

// Sign signs and stores a checkpoint of the tree's current size (the
// injected clock's time) and returns it.
func (l *Log) Sign() ([]byte, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	size := l.tree.Size()
	return l.signLocked(size)
}

// SignAt signs and stores a checkpoint of the given size (at snapshots).
func (l *Log) SignAt(size uint64) ([]byte, error) {
	if err := l.Reach(size); err != nil {
		return nil, err
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.signLocked(size)
}

func (l *Log) signLocked(size uint64) ([]byte, error) {
	root, err := l.tree.Root(size)
	if err != nil {
		return nil, err
	}
	now := l.clock.Now().UnixMilli()
	signed, err := l.key.Sign(checkpoint.Checkpoint{Size: size, Root: root, Time: now})
	if err != nil {
		return nil, err
	}
	if err := l.store.PutCheckpoint(size, signed); err != nil {
		return nil, err
	}
	l.lastTime = now
	if size > l.lastSize {
		l.lastSize = size
	}
	return signed, nil
}

// Latest returns the latest stored checkpoint.
func (l *Log) Latest() (uint64, []byte, error) { return l.store.LatestCheckpoint() }

// BySize returns the checkpoint stored for a tree size (ledger.ErrNotFound
// when none was signed at that size).
func (l *Log) BySize(size uint64) ([]byte, error) { return l.store.Checkpoint(size) }

// Close stops the signer.
func (l *Log) Close() {
	l.once.Do(func() { close(l.stop) })
	<-l.done
}

// ErrNotFound is a size without a stored checkpoint.
var ErrNotFound = ledger.ErrNotFound

// IsNotFound reports a missing checkpoint.
func IsNotFound(err error) bool { return errors.Is(err, ledger.ErrNotFound) }
