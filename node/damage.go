package node

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"github.com/rs/zerolog"

	"taskledger/audit/checkpoint"
	"taskledger/audit/merkle"
	"taskledger/audit/transparency"
	"taskledger/ledger"
	"taskledger/snapshots"
)

// ErrLogMissing is a data directory whose log is missing or empty while its
// snapshots prove that events existed.
var ErrLogMissing = errors.New("the log is missing or empty but snapshots prove it held events")

// checkLogPresent refuses to start a new, empty ledger where snapshots
// cover seq > 0: the log was lost, not never written.
func checkLogPresent(dataDir string) error {
	path := filepath.Join(dataDir, ledger.FileName)
	fi, err := os.Stat(path)
	missing := errors.Is(err, os.ErrNotExist)
	if err != nil && !missing {
		return fmt.Errorf("stat %s: %w", ledger.FileName, err)
	}
	if !missing && fi.Size() > 0 {
		return nil
	}
	snaps, err := snapshots.List(snapshots.Dir(dataDir))
	if err != nil {
		return err
	}
	if len(snaps) == 0 || snaps[0].Seq == 0 {
		return nil
	}
	what := "missing"
	if !missing {
		what = "empty (0 bytes)"
	}
	return fmt.Errorf("%w: %s is %s, but %s covers the log up to seq %d; restore %s from a backup "+
		"(a log that ends at seq %d or later) and start again; the snapshot alone cannot replace the log",
		ErrLogMissing, ledger.FileName, what, filepath.Base(snaps[0].Path), snaps[0].Seq, ledger.FileName, snaps[0].Seq)
}

// storedTree is the Merkle tree over every stored event (the pass start
// makes anyway for the transparency log), rebuilt in the background while
// the projections load: the two read the log independently.
type storedTree struct {
	done chan struct{}
	tree *merkle.Tree
	err  error
	took time.Duration
}

func buildStoredTree(store *ledger.Store) *storedTree {
	b := &storedTree{done: make(chan struct{})}
	go func() {
		defer close(b.done)
		t0 := time.Now() //tl:wallclock start-up phase
		b.tree, b.err = transparency.Build(store)
		b.took = time.Since(t0)
	}()
	return b
}

// wait returns the tree once rebuilt.
func (b *storedTree) wait() (*merkle.Tree, error) {
	<-b.done
	if b.err != nil {
		return nil, fmt.Errorf("transparency: rebuild the tree: %w", b.err)
	}
	return b.tree, nil
}

// checkStored holds the tree rebuilt from every stored event against the
// newest signed checkpoint, so that a changed byte in an event older than
// the snapshot is refused like one in the tail. It returns the tree and
// the point the hash-chain check must start from: from (the snapshot, or
// the genesis), or the checkpoint's size when that is lower, so that every
// event is checked by one or the other.
func checkStored(store *ledger.Store, built *storedTree, dataDir string, from ledger.Head, log zerolog.Logger) (*merkle.Tree, ledger.Head, error) {
	tree, err := built.wait()
	if err != nil {
		return nil, from, err
	}
	key, err := checkpoint.LoadKey(dataDir)
	if errors.Is(err, checkpoint.ErrNoKey) {
		key, err = nil, nil
	}
	if err != nil {
		return nil, from, err
	}
	size, err := transparency.Check(store, tree, key, log)
	switch {
	case errors.Is(err, transparency.ErrRootMismatch):
		// Name the first damaged event (an extra pass, on refusal only).
		if cerr := checkChain(store, ledger.GenesisHead()); cerr != nil {
			return nil, from, cerr
		}
		return nil, from, fmt.Errorf("%w: %v: a stored event's bytes changed though every hash still holds; "+
			"restore taskledger.db from a backup", ErrChain, err)
	case errors.Is(err, transparency.ErrCheckpointBeyondLog):
		return nil, from, fmt.Errorf("%w: %v; restore taskledger.db from a backup", ErrLogBehindHead, err)
	case err != nil:
		return nil, from, err
	}
	if size >= from.Seq {
		return tree, from, nil
	}
	at, err := headAt(store, size)
	return tree, at, err
}

// headAt is the (seq, hash) of the stored event at seq (genesis for 0).
func headAt(store *ledger.Store, seq uint64) (ledger.Head, error) {
	if seq == 0 {
		return ledger.GenesisHead(), nil
	}
	var h *ledger.Head
	err := store.RangeRaw(seq-1, func(s uint64, raw []byte) error {
		if s == seq {
			if e, err := ledger.DecodeEvent(raw); err == nil {
				h = &ledger.Head{Seq: s, Hash: e.Hash, At: e.At}
			}
		}
		return errStop
	})
	if err != nil && !errors.Is(err, errStop) {
		return ledger.Head{}, err
	}
	if h == nil {
		return ledger.Head{}, fmt.Errorf("%w at seq %d: the event does not decode", ErrChain, seq)
	}
	return *h, nil
}

// checkSnapshotsReached refuses a log that ends before a snapshot of its
// own data directory: the snapshot (intact, written after the commit it
// covers was fsynced) proves the log held that seq, so the events after
// the log's end were lost (an older copy put in place, bbolt fallen back
// to an older meta page) whether or not DATA/head still says so.
func checkSnapshotsReached(l *Loaded) error {
	for _, r := range l.Refused {
		if errors.Is(r.Err, snapshots.ErrBeyondHead) {
			return fmt.Errorf("%w: %s covers the log up to seq %d, the log ends at seq %d (bbolt fell back to an "+
				"older commit, or the log was replaced by an older copy); restore taskledger.db from a backup "+
				"that holds seq %d", ErrLogBehindHead, filepath.Base(r.Path), r.Seq, l.State.Head.Seq, r.Seq)
		}
	}
	return nil
}
