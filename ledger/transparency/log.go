// Package transparency joins the Merkle tree over the log, the checkpoint
// key and the stored checkpoints into what a running node serves: the
// latest signed checkpoint, checkpoints by size, and inclusion and
// consistency proofs.
package transparency

import (
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/rs/zerolog"

	"taskledger/ledger"
	"taskledger/ledger/checkpoint"
	"taskledger/ledger/merkle"
)

// MinInterval is the least time between two checkpoints signed after
// commits (by the injected clock); snapshots sign one regardless.
const MinInterval = time.Second

// Clock is the injected clock.
type Clock interface{ Now() time.Time }

// Log is the tree, the key and the checkpoints of one ledger.
type Log struct {
	store *ledger.Store
	tree  *merkle.Tree
	key   *checkpoint.Key
	clock Clock
	log   zerolog.Logger

	mu       sync.Mutex // one signature at a time
	lastTime int64      // clock ms of the newest checkpoint signed after commits
	lastSize uint64
	kick     chan struct{}
	stop     chan struct{}
	done     chan struct{}
	once     sync.Once
}

// Build rebuilds the tree from every event of the log.
func Build(store *ledger.Store) (*merkle.Tree, error) {
	tr := merkle.New()
	var first uint64 = 1
	batch := make([][]byte, 0, 4096)
	flush := func() error {
		if len(batch) == 0 {
			return nil
		}
		err := tr.AppendHashes(first, batch)
		first += uint64(len(batch))
		batch = batch[:0]
		return err
	}
	err := store.RangeRaw(0, func(seq uint64, raw []byte) error {
		batch = append(batch, merkle.LeafHash(raw)) // raw lives only during the call
		if len(batch) == cap(batch) {
			return flush()
		}
		return nil
	})
	if err == nil {
		err = flush()
	}
	return tr, err
}

// Open rebuilds the tree from the log, loads (or creates) the key in dir
// and signs a checkpoint of the current size unless one is stored.
func Open(store *ledger.Store, dir string, clock Clock, log zerolog.Logger) (*Log, error) {
	tree, err := Build(store)
	if err != nil {
		return nil, fmt.Errorf("transparency: rebuild the tree: %w", err)
	}
	key, created, err := checkpoint.LoadOrCreateKey(dir)
	if err != nil {
		return nil, err
	}
	if created {
		log.Info().Str("origin", key.Origin()).Msg("checkpoint key created (checkpoint-key, mode 0600)")
	}
	l := &Log{store: store, tree: tree, key: key, clock: clock, log: log,
		kick: make(chan struct{}, 1), stop: make(chan struct{}), done: make(chan struct{})}
	if size, _, err := store.LatestCheckpoint(); err != nil || size < tree.Size() {
		if _, err := l.Sign(); err != nil {
			return nil, err
		}
	}
	go l.run()
	return l, nil
}

// Tree is the Merkle tree.
func (l *Log) Tree() *merkle.Tree { return l.tree }

// Key is the signing key.
func (l *Log) Key() *checkpoint.Key { return l.key }

// Committed is the committer's hook: it extends the tree and asks for a
// checkpoint. It never blocks.
func (l *Log) Committed(first uint64, raws [][]byte) {
	if err := l.tree.Append(first, raws); err != nil {
		l.log.Error().Err(err).Msg("merkle tree append failed; checkpoints stop until restart")
		return
	}
	select {
	case l.kick <- struct{}{}:
	default:
	}
}

func (l *Log) run() {
	defer close(l.done)
	tick := time.NewTicker(MinInterval / 4) // retries a checkpoint held back by MinInterval
	defer tick.Stop()
	dirty := false
	for {
		select {
		case <-l.stop:
			return
		case <-l.kick:
			dirty = true
		case <-tick.C:
		}
		if dirty && l.due() {
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
