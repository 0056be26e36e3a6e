package bench

import (
	"fmt"
	"io"
	"os"
	"path/filepath"
	"runtime"
	"runtime/debug"
	"time"

	"github.com/rs/zerolog"
	"github.com/vmihailenco/msgpack/v5"

	"taskledger/ledger"
	"taskledger/node"
	"taskledger/projections"
)

// The replay and start-up figures of `taskledger bench --mode replay`,
// measured in one run on two kept logs (replaylog.go): the lifecycle log
// (Events events) for the scans and the full replay, the tasks log (Tasks
// authorized tasks) for the start of a million-task ledger.

// ReplayConfig sizes a replay run.
type ReplayConfig struct {
	// Root holds the logs, kept between runs (replay-<mix>-<events>).
	Root   string
	Events uint64 // events of the lifecycle log
	Tasks  uint64 // tasks (events) of the tasks log
	Tail   uint64 // events after each log's snapshot
	// Progress receives a line before each log is built (nil: none).
	Progress io.Writer
}

// Timing is one measured pass.
type Timing struct {
	Wall, CPU time.Duration
	Events    uint64
}

func (t Timing) perSecond() float64 {
	if t.Wall <= 0 {
		return 0
	}
	return float64(t.Events) / t.Wall.Seconds()
}

// ReplayReport holds the figures of a replay run.
type ReplayReport struct {
	Lifecycle, TasksLog *ReplayLog
	// GenericScan is a bbolt cursor scan of the lifecycle log decoding
	// every envelope with the generic msgpack decoder (reflection);
	// EnvelopeScan the same scan with replay's envelope decoder
	// (ledger.Store.Range, applying nothing); Replay the full rebuild
	// (projections.Rebuild: decode, apply, soft records).
	GenericScan, EnvelopeScan, Replay Timing
	// StartTasks and StartLifecycle are node.LoadProjections (newest
	// snapshot read, checked and restored, tail replayed, soft records
	// loaded) of each log; *GC is the CPU of the first collection after
	// it, which the load puts off.
	StartTasks, StartLifecycle     Timing
	StartTasksGC, StartLifecycleGC time.Duration
	// Tasks, Records: the lifecycle replay's tasks and retained
	// idempotency records; RestoredTasks the tasks log's.
	Tasks, Records, RestoredTasks int
	// RecordBytes and TaskBytes are the live heap the replayed
	// projections hold per idempotency record and per task (the rest of
	// the projections), measured as deltas of the heap after a
	// collection; RestoredTaskBytes the heap a start from snapshot holds
	// per task of the tasks log (its record, authorization and share of
	// the snapshot buffer included).
	RecordBytes, TaskBytes, RestoredTaskBytes float64
	// StoredBytes is the sum of the lifecycle log's stored events;
	// FileBytes its bbolt file's size (events, stream index, soft
	// records, meta, free pages).
	StoredBytes, FileBytes int64
}

// Replay builds or reuses the two logs and measures them.
func Replay(cfg ReplayConfig) (*ReplayReport, error) {
	logs := [2]*ReplayLog{}
	for i, l := range []struct {
		mix    string
		events uint64
	}{{MixLifecycle, cfg.Events}, {MixTasks, cfg.Tasks}} {
		dir := filepath.Join(cfg.Root, fmt.Sprintf("replay-%s-%d", l.mix, l.events))
		if !ledger.Exists(dir) && cfg.Progress != nil {
			fmt.Fprintf(cfg.Progress, "building the %s log of %d events in %s (kept for the next runs)\n", l.mix, l.events, dir)
		}
		var err error
		if logs[i], err = ReplayLogIn(dir, l.events, cfg.Tail, l.mix); err != nil {
			return nil, err
		}
	}
	r := &ReplayReport{Lifecycle: logs[0], TasksLog: logs[1]}
	if err := r.measureStarts(); err != nil {
		return nil, err
	}
	store, err := ledger.Open(r.Lifecycle.Dir, ledger.Options{ReadOnly: true})
	if err != nil {
		return nil, err
	}
	defer store.Close()
	if info, err := os.Stat(store.Path()); err == nil {
		r.FileBytes = info.Size()
	}
	if err := r.measureScans(store); err != nil {
		return nil, err
	}
	return r, r.measureReplay(store)
}

// timed runs fn and returns its wall and process CPU time.
func timed(fn func() error) (Timing, error) {
	cpu0, t0 := processCPU(), time.Now()
	err := fn()
	return Timing{Wall: time.Since(t0), CPU: processCPU() - cpu0}, err
}

func (r *ReplayReport) measureScans(store *ledger.Store) error {
	// An untimed pass first: every timed one reads the file from the page
	// cache, through pages already mapped.
	if err := store.RangeRaw(0, func(uint64, []byte) error { return nil }); err != nil {
		return err
	}
	var n uint64
	var size int64
	var err error
	r.GenericScan, err = timed(func() error {
		return store.RangeRaw(0, func(seq uint64, raw []byte) error {
			var e ledger.Event
			n++
			size += int64(len(raw))
			return msgpack.Unmarshal(raw, &e)
		})
	})
	if err != nil {
		return fmt.Errorf("bench: generic scan: %w", err)
	}
	r.GenericScan.Events, r.StoredBytes = n, size
	n = 0
	r.EnvelopeScan, err = timed(func() error {
		return store.Range(0, func(*ledger.Event) error { n++; return nil })
	})
	if err != nil {
		return fmt.Errorf("bench: envelope scan: %w", err)
	}
	r.EnvelopeScan.Events = n
	if r.GenericScan.Events != r.Lifecycle.Events || n != r.Lifecycle.Events {
		return fmt.Errorf("bench: the scans read %d and %d events of %d", r.GenericScan.Events, n, r.Lifecycle.Events)
	}
	return nil
}

func (r *ReplayReport) measureReplay(store *ledger.Store) error {
	base := liveHeap()
	var st *projections.State
	var err error
	// Every task of the lifecycle log ends, and an ended task settles
	// (leaves memory for the read model, D456): the replay keeps them, so
	// that what a task costs in memory while it lives can be measured.
	cfg := r.Lifecycle.Cfg
	cfg.KeepSettled = true
	r.Replay, err = timed(func() error {
		st, err = node.Rebuild(store, cfg)
		return err
	})
	if err != nil {
		return fmt.Errorf("bench: replay: %w", err)
	}
	if st.Head.Seq != r.Lifecycle.Events {
		return fmt.Errorf("bench: replay reached seq %d of %d", st.Head.Seq, r.Lifecycle.Events)
	}
	r.Replay.Events = st.Head.Seq
	r.Tasks, r.Records = len(st.Tasks), len(st.Idem.Records)
	full := liveHeap()
	st.Idem.Records, st.Idem.Order = nil, nil // what the records alone hold
	noRecords := liveHeap()
	runtime.KeepAlive(st)
	st = nil
	if r.Records > 0 {
		r.RecordBytes = float64(full-noRecords) / float64(r.Records)
	}
	if r.Tasks > 0 {
		r.TaskBytes = float64(int64(noRecords)-int64(base)) / float64(r.Tasks)
	}
	return nil
}

// measureStarts loads each log from its snapshot, each time with the
// memory of what came before returned to the system, as in a new process.
func (r *ReplayReport) measureStarts() error {
	for _, s := range []struct {
		log  *ReplayLog
		t    *Timing
		gc   *time.Duration
		heap *float64
	}{{r.TasksLog, &r.StartTasks, &r.StartTasksGC, &r.RestoredTaskBytes}, {r.Lifecycle, &r.StartLifecycle, &r.StartLifecycleGC, nil}} {
		store, err := ledger.Open(s.log.Dir, ledger.Options{ReadOnly: true})
		if err != nil {
			return err
		}
		base := liveHeap()
		debug.FreeOSMemory()
		var ld *node.Loaded
		*s.t, err = timed(func() error {
			ld, err = node.LoadProjections(store, s.log.Cfg, zerolog.Nop())
			return err
		})
		if err == nil && (ld.Snapshot == nil || ld.Snapshot.Seq != s.log.SnapSeq || ld.State.Head.Seq != s.log.Events) {
			err = fmt.Errorf("bench: %s did not start from its snapshot at seq %d", s.log.Dir, s.log.SnapSeq)
		}
		if err != nil {
			store.Close()
			return err
		}
		s.t.Events = ld.Replayed
		c0 := processCPU()
		held := liveHeap()
		*s.gc = processCPU() - c0
		if s.heap != nil {
			r.RestoredTasks = len(ld.State.Tasks)
			*s.heap = float64(int64(held)-int64(base)) / float64(max(r.RestoredTasks, 1))
		}
		runtime.KeepAlive(ld)
		ld = nil
		if err := store.Close(); err != nil {
			return err
		}
	}
	return nil
}

// liveHeap is the heap in use after a full collection.
func liveHeap() uint64 {
	runtime.GC()
	runtime.GC() // what finalizers of the first cycle freed
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	return m.HeapAlloc
}

// Lines is the report, one figure a line, the ratios after.
func (r *ReplayReport) Lines() []string {
	mb := func(n int64) float64 { return float64(n) / 1e6 }
	line := func(name, log string, t Timing, extra string) string {
		s := fmt.Sprintf("%-46s %-30s %8.2f s  CPU %6.2f s", name, log, t.Wall.Seconds(), t.CPU.Seconds())
		if rate := t.perSecond(); rate > 0 && extra == "" {
			s += fmt.Sprintf("  %9.0f events/s", rate)
		}
		return s + extra
	}
	lc := fmt.Sprintf("lifecycle (%d events)", r.Lifecycle.Events)
	ratio := func(label string, a, b Timing, note string) string {
		return fmt.Sprintf("ratio %-60s %6.2f  (CPU %.2f)%s", label, a.Wall.Seconds()/b.Wall.Seconds(), a.CPU.Seconds()/b.CPU.Seconds(), note)
	}
	return []string{
		line("scan + generic msgpack decode", lc, r.GenericScan, ""),
		line("scan + replay's envelope decoder", lc, r.EnvelopeScan, ""),
		line("full replay (decode + apply)", lc, r.Replay, ""),
		line(fmt.Sprintf("start from snapshot + %d-event tail", r.StartTasks.Events), fmt.Sprintf("tasks (%d tasks)", r.RestoredTasks),
			r.StartTasks, fmt.Sprintf("  first GC after: CPU %.2f s", r.StartTasksGC.Seconds())),
		line(fmt.Sprintf("start from snapshot + %d-event tail", r.StartLifecycle.Events), fmt.Sprintf("lifecycle (%d tasks)", r.Tasks),
			r.StartLifecycle, fmt.Sprintf("  first GC after: CPU %.2f s", r.StartLifecycleGC.Seconds())),
		ratio("full replay / scan + generic msgpack decode, same log", r.Replay, r.GenericScan, "  (aim ≤ 1.5)"),
		ratio("full replay / scan + replay's envelope decoder, same log", r.Replay, r.EnvelopeScan, ""),
		fmt.Sprintf("memory replayed (lifecycle): %.0f B per retained idempotency record (%d records), %.0f B per task (%d tasks, the rest of the projections)",
			r.RecordBytes, r.Records, r.TaskBytes, r.Tasks),
		fmt.Sprintf("memory restored (tasks log): %.0f B per task (%d tasks; its idempotency record, authorization and share of the snapshot buffer included)",
			r.RestoredTaskBytes, r.RestoredTasks),
		fmt.Sprintf("disk (lifecycle): %.0f file bytes per event (taskledger.db %.1f MB), %.0f stored bytes per event; snapshot %.1f MB (%.0f B per task)",
			float64(r.FileBytes)/float64(r.Lifecycle.Events), mb(r.FileBytes), float64(r.StoredBytes)/float64(r.Lifecycle.Events),
			mb(r.Lifecycle.SnapshotBytes), float64(r.Lifecycle.SnapshotBytes)/float64(max(r.Tasks, 1))),
		fmt.Sprintf("disk (tasks log): snapshot %.1f MB (%.0f B per task)", mb(r.TasksLog.SnapshotBytes),
			float64(r.TasksLog.SnapshotBytes)/float64(max(r.RestoredTasks, 1))),
	}
}
