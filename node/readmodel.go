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
const rebuildChunk = 1 << 16

// syncReadModel makes the on-disk read model of settled tasks the one of
// the loaded projections: kept when it was written with this build's
// layout, schema and retention up to the log's head (every commit writes
// it with its events); otherwise rebuilt by a replay of the whole log that
// hands each task to disk as it settles (a file written before it
// existed, a schema change, another retention, a copied log). rebuilt
// says the load's own replay of the whole log wrote it already
// (wholeLogLoad): only its meta record, which makes it current, is left
// to write, now that the start's checks of the log passed. Then the
// projections read settled tasks from it.
func syncReadModel(store *ledger.Store, st *projections.State, rebuilt *readModelRebuild, log zerolog.Logger) error {
	if rebuilt == nil {
		current, err := readModelCurrent(store, st)
		if err != nil {
			return err
		}
		if !current {
			again, n, err := rebuildReadModel(store, st.Config(), nil)
			if err != nil {
				return fmt.Errorf("rebuild the read model: %w", err)
			}
			rebuilt = &readModelRebuild{state: again, tasks: n}
		}
	}
	if rebuilt != nil {
		if err := commitReadModel(store, rebuilt.state); err != nil {
			return fmt.Errorf("rebuild the read model: %w", err)
		}
		log.Info().Uint64("head", st.Head.Seq).Int("tasks", rebuilt.tasks).Msg("read model of finished tasks rebuilt from the log")
	}
	return attachReadModel(store, st)
}

// readModelRebuild is a replay of the whole log that wrote the read model
// (all but its meta record).
type readModelRebuild struct {
	state *projections.State
	tasks int
}

// wholeLogLoad is the whole-log replay of a start on the bbolt file that
// found no snapshot to load: when the read model on disk is not the one
// of the log's head, the same replay rebuilds it (one pass over the log,
// not two), and *rebuilt tells syncReadModel so.
func wholeLogLoad(store *ledger.Store, rebuilt **readModelRebuild) func(projections.Config) (*projections.State, error) {
	return func(cfg projections.Config) (*projections.State, error) {
		head, err := store.Head()
		if err != nil {
			return nil, err
		}
		rmHead, version, err := readModelMeta(store)
		if err != nil {
			return nil, err
		}
		if projections.ReadModelCurrentAt(cfg, head.Seq, rmHead, version) {
			return Rebuild(store, cfg)
		}
		st, n, err := rebuildReadModel(store, cfg, nil)
		if err != nil {
			return nil, err
		}
		*rebuilt = &readModelRebuild{state: st, tasks: n}
		return st, nil
	}
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
	head, version, err := readModelMeta(store)
	if err != nil {
		return false, err
	}
	return st.ReadModelCurrent(head, version), nil
}

// readModelMeta is the head and version the read model's meta record
// holds (nil when absent).
func readModelMeta(store *ledger.Store) (head, version []byte, err error) {
	if head, err = store.ReadModelGet(projections.RMMeta, projections.RMHeadKey()); err != nil {
		return nil, nil, err
	}
	version, err = store.ReadModelGet(projections.RMMeta, projections.RMVersionKey())
	return head, version, err
}

// rebuildReadModel drops the read model and writes it again from a replay
// of the whole log, in transactions of rebuildChunk writes, with the
// garbage collector as Rebuild sets it. It returns the replay's
// projections and the number of settled tasks. The meta record is left
// out: until commitReadModel writes it the read model is not current,
// and a start cut meanwhile, or refused by a later check, rebuilds it
// again. progress, if set, is called after every event.
func rebuildReadModel(store *ledger.Store, cfg projections.Config, progress func(seq uint64)) (*projections.State, int, error) {
	if err := store.ResetReadModel(nil); err != nil {
		return nil, 0, err
	}
	var ws []ledger.ReadModelWrite
	n := 0
	flush := func() error {
		var err error
		if len(ws) >= rebuildChunk {
			err, ws = store.WriteReadModel(ws), ws[:0]
		}
		return err
	}
	defer replayGC()()
	st, err := projections.RebuildSettling(store, cfg, func(t *projections.Task) error {
		tw, err := projections.TaskWrites(t)
		if err != nil {
			return err
		}
		n++
		ws = append(ws, tw...)
		return flush()
	}, func(t string) error {
		ws = append(ws, projections.TombWrite(t))
		return flush()
	}, progress)
	if err != nil {
		return nil, 0, err
	}
	return st, n, store.WriteReadModel(ws)
}

// commitReadModel writes the meta record of a rebuilt read model (its
// head, settled counts and version): from then on it is current.
func commitReadModel(store *ledger.Store, st *projections.State) error {
	return store.WriteReadModel(st.ReadModelMeta())
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
