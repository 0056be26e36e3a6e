package snapshots_test

// Benchmarks of start-up: a full replay of the log (msgpack decode +
// apply), the raw ceiling (bbolt cursor scan + envelope decode, no apply;
// with replay's decoder and with the generic msgpack decoder), and
// start-up from the newest snapshot + a tail. The log is built once per
// process by the real command deciders (bench.BuildReplayLog: no HTTP, no
// sequencer goroutine, no fsync) and shared by the benchmarks:
//
//	go test -run '^$' -bench . -benchtime 3x ./snapshots/
//
// Sizes come from the environment:
//
//	TASKLEDGER_BENCH_EVENTS  events in the log (default 200000)
//	TASKLEDGER_BENCH_TAIL    events after the snapshot (default 10000)
//	TASKLEDGER_BENCH_MIX     lifecycle (default: create, claim, start,
//	                         heartbeat, complete per task) or tasks (only
//	                         authorized task.created: one task per event)
//	TASKLEDGER_BENCH_DIR     build the log there and keep it; a directory
//	                         that already holds a ledger is reused as is

import (
	"fmt"
	"os"
	"os/exec"
	"runtime"
	"runtime/debug"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/rs/zerolog"
	"github.com/vmihailenco/msgpack/v5"

	"taskledger/bench"
	"taskledger/commands"
	"taskledger/ledger"
	"taskledger/node"
	"taskledger/projections"
	"taskledger/snapshots"
)

func envInt(name string, def int) int {
	if v, err := strconv.Atoi(os.Getenv(name)); err == nil && v > 0 {
		return v
	}
	return def
}

var (
	benchOnce sync.Once
	benchLog  *bench.ReplayLog
	benchErr  error
	benchRoot string
)

func TestMain(m *testing.M) {
	if dir := os.Getenv(startChildEnv); dir != "" {
		os.Exit(startChild(dir))
	}
	code := m.Run()
	if benchRoot != "" {
		os.RemoveAll(benchRoot)
	}
	os.Exit(code)
}

// getBenchLog returns the log of the environment's size and mix, kept in
// TASKLEDGER_BENCH_DIR (reused when it holds one) or built in a temporary
// directory (bench.ReplayLogIn).
func getBenchLog(b *testing.B) *bench.ReplayLog {
	b.Helper()
	benchOnce.Do(func() {
		dir := os.Getenv("TASKLEDGER_BENCH_DIR")
		if dir == "" {
			if benchRoot, benchErr = os.MkdirTemp("", "taskledger-snapshot-bench-"); benchErr != nil {
				return
			}
			dir = benchRoot + "/log"
		}
		if ledger.Exists(dir) {
			benchLog, benchErr = bench.OpenReplayLog(dir)
			return
		}
		mix := os.Getenv("TASKLEDGER_BENCH_MIX")
		if mix == "" {
			mix = bench.MixLifecycle
		}
		benchLog, benchErr = bench.BuildReplayLog(dir, uint64(envInt("TASKLEDGER_BENCH_EVENTS", 200000)),
			uint64(envInt("TASKLEDGER_BENCH_TAIL", 10000)), mix)
	})
	if benchErr != nil {
		b.Fatal(benchErr)
	}
	return benchLog
}

func openBench(b *testing.B) (*bench.ReplayLog, *ledger.Store) {
	l := getBenchLog(b)
	store, err := ledger.Open(l.Dir, ledger.Options{ReadOnly: true})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { store.Close() })
	return l, store
}

func report(b *testing.B, events uint64) {
	b.ReportMetric(float64(events)*float64(b.N)/b.Elapsed().Seconds(), "events/s")
}

// cpuMetric reports the process CPU time (user + system, every thread,
// the garbage collector's included) per operation since start: steadier
// than wall time on a shared machine.
func cpuMetric(b *testing.B, used time.Duration) {
	b.ReportMetric(float64(used.Microseconds())/1000/float64(b.N), "cpu-ms/op")
}

// BenchmarkReplayFull is the full rebuild: every event decoded and
// applied (node.Rebuild: with GOMEMLIMIT set, as serve sets a limit, the
// collector is off meanwhile).
func BenchmarkReplayFull(b *testing.B) {
	l, store := openBench(b)
	b.ResetTimer()
	c0 := processCPU()
	for i := 0; i < b.N; i++ {
		st, err := node.Rebuild(store, l.Cfg)
		if err != nil || st.Head.Seq != l.Events {
			b.Fatalf("rebuild: %v", err)
		}
	}
	cpuMetric(b, processCPU()-c0)
	report(b, l.Events)
}

// BenchmarkRawScanDecode is the ceiling to compare with: a bbolt cursor
// scan decoding every envelope (with the decoder replay uses), applying
// nothing.
func BenchmarkRawScanDecode(b *testing.B) {
	rawScan(b, func(raw []byte) error {
		_, err := ledger.DecodeEvent(raw)
		return err
	})
}

// BenchmarkRawScanDecodeGeneric is the same scan decoding every envelope
// with the generic msgpack decoder (reflection), as replay did before
// envelopes were decoded by hand.
func BenchmarkRawScanDecodeGeneric(b *testing.B) {
	rawScan(b, func(raw []byte) error {
		var e ledger.Event
		return msgpack.Unmarshal(raw, &e)
	})
}

func rawScan(b *testing.B, decode func([]byte) error) {
	l, store := openBench(b)
	b.ResetTimer()
	c0 := processCPU()
	var size int
	for i := 0; i < b.N; i++ {
		var n uint64
		size = 0
		err := store.RangeRaw(0, func(seq uint64, raw []byte) error {
			if err := decode(raw); err != nil {
				return err
			}
			n++
			size += len(raw)
			return nil
		})
		if err != nil || n != l.Events {
			b.Fatalf("scan: %v (%d events)", err, n)
		}
	}
	cpuMetric(b, processCPU()-c0)
	report(b, l.Events)
	b.ReportMetric(float64(size)/float64(l.Events), "bytes/event")
}

// BenchmarkStartFromSnapshotTail is start-up's load: the newest snapshot
// read, checked (checksum, hash at its seq) and restored, the tail
// replayed, the soft records loaded. Every load starts with the memory
// of the previous one returned to the system, as a new process would.
// The load keeps the garbage collector off (gcfloor.Pause); the CPU of the
// first collection after it is reported apart (gc-after-cpu-ms/op).
func BenchmarkStartFromSnapshotTail(b *testing.B) {
	l, store := openBench(b)
	b.ReportMetric(float64(l.SnapshotBytes), "snapshot-bytes")
	debug.FreeOSMemory()
	b.ResetTimer()
	var used, deferred time.Duration
	for i := 0; i < b.N; i++ {
		c0 := processCPU()
		ld, err := node.LoadProjections(store, l.Cfg, zerolog.Nop())
		used += processCPU() - c0
		if err != nil || ld.Snapshot == nil || ld.Snapshot.Seq != l.SnapSeq || ld.State.Head.Seq != l.Events {
			b.Fatalf("load: %v %+v", err, ld)
		}
		b.StopTimer()
		c1 := processCPU() // the collection the load put off, untimed
		runtime.GC()
		deferred += processCPU() - c1
		runtime.KeepAlive(ld) // the projections are live during that collection
		ld = nil
		debug.FreeOSMemory()
		b.StartTimer()
	}
	cpuMetric(b, used)
	b.ReportMetric(float64(deferred.Microseconds())/1000/float64(b.N), "gc-after-cpu-ms/op")
}

// BenchmarkSnapshotCapture is the part of a running server's snapshot
// that holds the projections' read lock (the sequencer waits meanwhile):
// a copy of the projections, no encoding.
func BenchmarkSnapshotCapture(b *testing.B) {
	l, store := openBench(b)
	st, err := projections.Rebuild(store, l.Cfg)
	if err != nil {
		b.Fatal(err)
	}
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		_ = st.Capture()
	}
}

// BenchmarkSnapshotEncode is the encoding of a capture, outside any lock.
func BenchmarkSnapshotEncode(b *testing.B) {
	l, store := openBench(b)
	st, err := projections.Rebuild(store, l.Cfg)
	if err != nil {
		b.Fatal(err)
	}
	c := st.Capture()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		if _, err := c.Encode(); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkSnapshotWrite is the file part of a snapshot, outside any
// lock: checksum, write, fsync, rename, directory fsync.
func BenchmarkSnapshotWrite(b *testing.B) {
	l, store := openBench(b)
	st, err := projections.Rebuild(store, l.Cfg)
	if err != nil {
		b.Fatal(err)
	}
	s, err := node.NewSnapshot(st, nil)
	if err != nil {
		b.Fatal(err)
	}
	dir := b.TempDir()
	b.SetBytes(int64(len(s.State)))
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		if _, err := snapshots.Write(dir, s); err != nil {
			b.Fatal(err)
		}
	}
}

// startChildEnv names the data directory a child process of
// BenchmarkStartFresh loads (and nothing else).
const startChildEnv = "TASKLEDGER_BENCH_START_CHILD"

// startChild is a fresh process's start: it loads the projections from the
// newest snapshot of dir and the log after it, and prints the wall and CPU
// time of the load and the CPU of the first collection after it.
func startChild(dir string) int {
	store, err := ledger.Open(dir, ledger.Options{ReadOnly: true})
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer store.Close()
	cfg := projections.Config{IdempotencyRetentionMs: commands.DefaultConfig().IdempotencyRetention.Milliseconds()}
	c0, t0 := processCPU(), time.Now() //tl:wallclock benchmark timing
	ld, err := node.LoadProjections(store, cfg, zerolog.Nop())
	wall, used := time.Since(t0), processCPU()-c0 //tl:wallclock benchmark timing
	if err != nil || ld.Snapshot == nil {
		fmt.Fprintln(os.Stderr, "load:", err)
		return 1
	}
	c1 := processCPU()
	runtime.GC()
	gc := processCPU() - c1
	runtime.KeepAlive(ld)
	fmt.Printf("start %d %d %d %d\n", wall.Nanoseconds(), used.Nanoseconds(), gc.Nanoseconds(), len(ld.State.Tasks))
	return 0
}

// BenchmarkStartFresh is BenchmarkStartFromSnapshotTail in a new process
// each time, as a server starts: nothing allocated before, every page of
// the projections new. ns/op includes starting the process and opening the
// ledger; start-ms/op is the load alone.
func BenchmarkStartFresh(b *testing.B) {
	l := getBenchLog(b)
	var wall, used, gc time.Duration
	var tasks int
	for i := 0; i < b.N; i++ {
		cmd := exec.Command(os.Args[0], "-test.run=^$")
		cmd.Env = append(os.Environ(), startChildEnv+"="+l.Dir)
		out, err := cmd.Output()
		var w, u, g int64
		if err == nil {
			_, err = fmt.Sscanf(string(out), "start %d %d %d %d", &w, &u, &g, &tasks)
		}
		if err != nil {
			b.Fatalf("child: %v: %s", err, out)
		}
		wall, used, gc = wall+time.Duration(w), used+time.Duration(u), gc+time.Duration(g)
	}
	per := func(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 / float64(b.N) }
	b.ReportMetric(per(wall), "start-ms/op")
	b.ReportMetric(per(used), "cpu-ms/op")
	b.ReportMetric(per(gc), "gc-after-cpu-ms/op")
	b.ReportMetric(float64(tasks), "tasks")
}
