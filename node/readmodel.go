package node

import (
	"bytes"
	"fmt"

	"github.com/rs/zerolog"

	"taskledger/ledger"
	"taskledger/projections"
)

// rebuildChunk is how many read-model writes a rebuild commits per
// transaction (the meta record, written last, makes it current).
var rebuildChunk = 1 << 16

// syncReadModel makes the on-disk read model of settled tasks the one of
// the loaded projections: kept when it was written with this build's
// layout, schema and retention up to the log's head (every commit writes
// it with its events); otherwise rebuilt by a replay of the whole log that
// hands each task to disk as it settles (a file written before it
// existed, a schema change, another retention, a copied log). Then the
// projections read settled tasks from it.
func syncReadModel(store *ledger.Store, st *projections.State, log zerolog.Logger) error {
	current, err := readModelCurrent(store, st)
	if err != nil {
		return err
	}
	if !current {
		n, err := rebuildReadModel(store, st.Config())
		if err != nil {
			return fmt.Errorf("rebuild the read model: %w", err)
		}
		log.Info().Uint64("head", st.Head.Seq).Int("tasks", n).Msg("read model of finished tasks rebuilt from the log")
	}
	return attachReadModel(store, st)
}

// attachReadModel makes freshly loaded projections, whose settled tasks
// are in the read model on disk (at the same head), read them from there
// and count them.
func attachReadModel(store *ledger.Store, st *projections.State) error {
	counts, err := store.ReadModelGet(projections.RMMeta, projections.RMCountsKey())
	if err != nil {
		return err
	}
	if err := st.SettledCountsFrom(counts); err != nil {
		return err
	}
	st.SettleLoaded()
	st.UseFinished(store)
	return nil
}

func readModelCurrent(store *ledger.Store, st *projections.State) (bool, error) {
	head, err := store.ReadModelGet(projections.RMMeta, projections.RMHeadKey())
	if err != nil {
		return false, err
	}
	version, err := store.ReadModelGet(projections.RMMeta, projections.RMVersionKey())
	if err != nil {
		return false, err
	}
	return st.ReadModelCurrent(head, version), nil
}

// rebuildReadModel drops the read model and writes it again from a replay
// of the whole log, in transactions of about rebuildChunk writes, its meta
// record last. It returns the number of settled tasks.
//
// The replay reads the log in slices of rebuildChunk events, each in a
// read transaction of its own, and commits what a slice settled only after
// that transaction has ended: a write that grows the file remaps it, which
// waits for every open read transaction, its own goroutine's included (a
// write from inside the replay's read hung the first start of a
// 1,000,000-task log for good).
func rebuildReadModel(store *ledger.Store, cfg projections.Config) (int, error) {
	if err := store.ResetReadModel(nil); err != nil {
		return 0, err
	}
	var ws []ledger.ReadModelWrite
	n := 0
	src := slicedLog{Store: store, every: rebuildChunk, between: func() error {
		var err error
		if len(ws) >= rebuildChunk {
			err, ws = store.WriteReadModel(ws), ws[:0]
		}
		return err
	}}
	again, err := projections.RebuildSettling(src, cfg, func(t *projections.Task) error {
		tw, err := projections.TaskWrites(t)
		if err != nil {
			return err
		}
		n++
		ws = append(ws, tw...)
		return nil
	}, func(t string) error {
		ws = append(ws, projections.TombWrite(t))
		return nil
	})
	if err != nil {
		return 0, err
	}
	return n, store.WriteReadModel(append(ws, again.ReadModelMeta()...))
}

// slicedLog is the store read in slices of every events, each in its own
// read transaction, with between called after each slice's transaction
// has ended (where the caller may write).
type slicedLog struct {
	*ledger.Store
	every   int
	between func() error
}

func (l slicedLog) RangeTransient(after uint64, fn func(*ledger.Event) error) error {
	for {
		n, more := 0, false
		err := l.Store.RangeTransient(after, func(e *ledger.Event) error {
			if n == l.every {
				more = true
				return ledger.ErrStop
			}
			n++
			after = e.Seq
			return fn(e)
		})
		if err != nil {
			return err
		}
		if err := l.between(); err != nil {
			return err
		}
		if !more {
			return nil
		}
	}
}

// compareReadModel returns the onSettle of a replay that checks each
// settled task's writes against the read model on disk, and a check of
// what is left for after the replay: the meta record, and no key on disk
// that the replay did not write.
func compareReadModel(store *ledger.Store) (func(*projections.Task) error, func(string) error, func(*projections.State) error) {
	seen := map[string]int{}
	check := func(w ledger.ReadModelWrite) error {
		got, err := store.ReadModelGet(w.Bucket, w.Key)
		if err != nil {
			return err
		}
		if got == nil {
			return fmt.Errorf("read model: %s %x is missing on disk", w.Bucket, w.Key)
		}
		if !bytes.Equal(got, w.Value) {
			return fmt.Errorf("read model: %s %x differs from a replay", w.Bucket, w.Key)
		}
		seen[w.Bucket]++
		return nil
	}
	onSettle := func(t *projections.Task) error {
		ws, err := projections.TaskWrites(t)
		if err != nil {
			return err
		}
		for _, w := range ws {
			if err := check(w); err != nil {
				return err
			}
		}
		return nil
	}
	onTomb := func(t string) error { return check(projections.TombWrite(t)) }
	finish := func(st *projections.State) error {
		for _, w := range st.ReadModelMeta() {
			if err := check(w); err != nil {
				return err
			}
		}
		onDisk := map[string]int{}
		if err := store.ReadModelBuckets(func(bucket string, _, _ []byte) error {
			onDisk[bucket]++
			return nil
		}); err != nil {
			return err
		}
		for b, n := range onDisk {
			if n != seen[b] {
				return fmt.Errorf("read model: %s holds %d keys, a replay writes %d", b, n, seen[b])
			}
		}
		return nil
	}
	return onSettle, onTomb, finish
}
