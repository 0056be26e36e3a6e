package node

import (
	"bytes"
	"fmt"
	"slices"
	"strings"
	"sync/atomic"
	"time"

	"github.com/rs/zerolog"

	"taskledger/ledger"
	"taskledger/projections"
)

// rebuildChunk is how many events a rebuild replays per read transaction.
var rebuildChunk = 1 << 16

// syncReadModel makes the on-disk read model of settled tasks the one of
// the loaded projections: kept when it was written with this build's
// layout, schema and retention up to the log's head (every commit writes
// it with its events); otherwise rebuilt by a replay of the whole log that
// hands each task to disk as it settles (a file written before it
// existed, a schema change, another retention, a copied log). rebuilt
// says the load's own replay of the whole log wrote it already
// (wholeLogLoad): only its meta record, which makes it current, is left
// to write, now that the start's checks of the log passed. Then the
// projections read settled tasks from it, taking the tombstone filter's
// full segments from ahead (nil: none) when the read model was current.
func syncReadModel(store *ledger.Store, st *projections.State, rebuilt *readModelRebuild, ahead *filterAhead, log zerolog.Logger) error {
	var rows *projections.TombFilterRows
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
		} else if rows = ahead.rows(); rows != nil {
			ahead.taken = rows.Segments()
		}
	}
	if rebuilt != nil {
		if err := commitReadModel(store, rebuilt.state); err != nil {
			return fmt.Errorf("rebuild the read model: %w", err)
		}
		log.Info().Uint64("head", st.Head.Seq).Int("tasks", rebuilt.tasks).Msg("read model of finished tasks rebuilt from the log")
	}
	return attachReadModel(store, st, rows, log)
}

// filterAhead reads the tombstone filter's full segments from the read
// model's rows on a goroutine of its own, started with the start's first
// read: on a long history they are megabytes scattered over the file
// (20 MB at 4,000,000 finished tasks), and read after the load they
// added their whole read to the start. They are used only if the read
// model proves current at the head (syncReadModel); otherwise they are
// dropped and the segments read again from the rebuilt rows.
type filterAhead struct {
	done    chan struct{}
	stopped atomic.Bool
	got     *projections.TombFilterRows
	took    time.Duration
	taken   int // segments handed to the projections (0: dropped)
}

func readFilterAhead(store *ledger.Store) *filterAhead {
	a := &filterAhead{done: make(chan struct{})}
	go func() {
		defer close(a.done)
		t0 := time.Now() //tl:wallclock start-up phase
		// A segment it cannot read is left to the read back after the
		// load, which reads it again and reports it.
		a.got, _ = projections.ReadTombFilterRows(store, a.stopped.Load)
		a.took = time.Since(t0)
	}()
	return a
}

// rows waits for the read and returns what it read.
func (a *filterAhead) rows() *projections.TombFilterRows {
	<-a.done
	return a.got
}

// stop calls the read off and waits for it to end: no read of the store
// outlives the open, refused or not.
func (a *filterAhead) stop() {
	a.stopped.Store(true)
	<-a.done
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
// and count them. A tombstone-filter segment whose rows cannot be read is
// logged, not fatal: until the read model is rebuilt, the lookups it
// would have answered read the tombstone index (same answers, a disk read
// more), and `taskledger verify` names the damage.
func attachReadModel(store *ledger.Store, st *projections.State, ahead *projections.TombFilterRows, log zerolog.Logger) error {
	counts, err := store.ReadModelGet(projections.RMMeta, projections.RMCountsKey())
	if err != nil {
		return err
	}
	if err := st.SettledCountsFrom(counts); err != nil {
		return err
	}
	st.SettleLoaded()
	if err := st.UseFinishedWith(store, ahead); err != nil {
		log.Warn().Err(err).Msg("read model: the tombstone filter is incomplete; expired-key lookups read the index until `taskledger projections rebuild`")
	}
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
// of the whole log, with the garbage collector as Rebuild sets it. It
// returns the replay's projections and the number of settled tasks. The
// meta record is left out: until commitReadModel writes it the read model
// is not current, and a start cut meanwhile, or refused by a later check,
// rebuilds it again. progress, if set, is called after every event.
//
// The replay reads the log in slices of rebuildChunk events, each in a
// read transaction of its own, and commits what it gathered only after
// that transaction has ended: a write that grows the file remaps it, which
// waits for every open read transaction, its own goroutine's included (a
// write from inside the replay's read hung the first start of a
// 1,000,000-task log for good). It commits once rebuildBytes have
// gathered, in key order (writeSorted).
func rebuildReadModel(store *ledger.Store, cfg projections.Config, progress func(seq uint64)) (*projections.State, int, error) {
	if err := store.ResetReadModel(nil); err != nil {
		return nil, 0, err
	}
	var ws []ledger.ReadModelWrite
	n, size := 0, 0
	add := func(w ledger.ReadModelWrite) {
		size += len(w.Bucket) + len(w.Key) + len(w.Value)
		ws = append(ws, w)
	}
	src := slicedLog{Store: store, every: rebuildChunk, between: func() error {
		if size < rebuildBytes {
			return nil
		}
		err := writeSorted(store, ws)
		ws, size = ws[:0], 0
		return err
	}}
	defer replayGC()()
	st, err := projections.RebuildSettling(src, cfg, func(t *projections.Task) error {
		tw, err := projections.TaskWrites(t)
		if err != nil {
			return err
		}
		n++
		for _, w := range tw {
			add(w)
		}
		return nil
	}, func(t string) error {
		add(projections.TombWrite(t))
		return nil
	}, progress)
	if err != nil {
		return nil, 0, err
	}
	// The records' rows, in key order already, in slices of rebuildBytes.
	err = st.EachRecordRow(func(w ledger.ReadModelWrite) error {
		add(w)
		return src.between()
	})
	if err == nil { // the tombstone filter's full segments, as live commits wrote them
		err = st.EachFilterRow(func(w ledger.ReadModelWrite) error {
			add(w)
			return nil
		})
	}
	if err != nil {
		return nil, 0, err
	}
	return st, n, writeSorted(store, ws)
}

// rebuildBytes is how many bytes of keys and values a rebuild gathers
// before it commits them. Document keys are task ids and tombstone keys
// hashes, so a transaction's puts land all over their buckets: each one
// dirties a page of its own unless the transaction holds many to a page.
// Large transactions, written in key order, write each page about once
// per transaction instead of once per put.
var rebuildBytes = 256 << 20

// writeSorted commits a rebuild's puts in bucket and key order (a
// rebuild only puts, and a key put twice keeps its last value: the sort
// is stable).
func writeSorted(store *ledger.Store, ws []ledger.ReadModelWrite) error {
	if len(ws) == 0 {
		return nil
	}
	slices.SortStableFunc(ws, func(a, b ledger.ReadModelWrite) int {
		if c := strings.Compare(a.Bucket, b.Bucket); c != 0 {
			return c
		}
		return bytes.Compare(a.Key, b.Key)
	})
	return store.WriteReadModel(ws)
}

// commitReadModel writes the meta record of a rebuilt read model (its
// head, settled counts and version): from then on it is current.
func commitReadModel(store *ledger.Store, st *projections.State) error {
	return store.WriteReadModel(st.ReadModelMeta())
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
		if err := st.EachRecordRow(check); err != nil {
			return err
		}
		if err := st.EachFilterRow(check); err != nil {
			return err
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

// RebuildWithReadModel replays the whole log into projections and
// rewrites the read model of settled tasks in the same pass, as a start
// does when it can use neither a snapshot nor the read model
// (`taskledger projections rebuild`: after a schema change, the next
// start then finds both current). progress gets each event's seq. The
// read model is current once it returns without an error; until then a
// start rebuilds it again.
func RebuildWithReadModel(store *ledger.Store, cfg projections.Config, progress func(seq uint64)) (*projections.State, error) {
	st, _, err := rebuildReadModel(store, cfg, progress)
	if err != nil {
		return nil, err
	}
	if err := commitReadModel(store, st); err != nil {
		return nil, err
	}
	return st, nil
}
