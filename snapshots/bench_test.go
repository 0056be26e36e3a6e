package snapshots_test

// Benchmarks of start-up: a full replay of the log (msgpack decode +
// apply), the raw ceiling (bbolt cursor scan + envelope decode, no apply;
// with replay's decoder and with the generic msgpack decoder), and
// start-up from the newest snapshot + a tail. The log is built once
// per process by the real command deciders (no HTTP, no sequencer
// goroutine, no fsync) and shared by the benchmarks:
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
	"crypto/sha256"
	"fmt"
	"os"
	"os/exec"
	"runtime"
	"runtime/debug"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/rs/zerolog"
	"github.com/vmihailenco/msgpack/v5"

	"taskledger/commands"
	"taskledger/events"
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

// benchLog is a generated data directory with a snapshot at head - tail.
type benchLog struct {
	dir      string
	events   uint64
	snapSeq  uint64
	tasks    int
	snapSize int
	cfg      projections.Config
}

var (
	benchOnce sync.Once
	bench     *benchLog
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

func getBenchLog(b *testing.B) *benchLog {
	b.Helper()
	benchOnce.Do(func() {
		if dir := os.Getenv("TASKLEDGER_BENCH_DIR"); dir != "" {
			if ledger.Exists(dir) {
				bench, benchErr = reuseBenchLog(dir)
				return
			}
			bench, benchErr = buildBenchLog(dir, uint64(envInt("TASKLEDGER_BENCH_EVENTS", 200000)),
				uint64(envInt("TASKLEDGER_BENCH_TAIL", 10000)), os.Getenv("TASKLEDGER_BENCH_MIX"))
			return
		}
		benchRoot, benchErr = os.MkdirTemp("", "taskledger-snapshot-bench-")
		if benchErr == nil {
			bench, benchErr = buildBenchLog(benchRoot, uint64(envInt("TASKLEDGER_BENCH_EVENTS", 200000)),
				uint64(envInt("TASKLEDGER_BENCH_TAIL", 10000)), os.Getenv("TASKLEDGER_BENCH_MIX"))
		}
	})
	if benchErr != nil {
		b.Fatal(benchErr)
	}
	return bench
}

// reuseBenchLog describes a kept benchmark log.
func reuseBenchLog(dir string) (*benchLog, error) {
	store, err := ledger.Open(dir, ledger.Options{ReadOnly: true})
	if err != nil {
		return nil, err
	}
	defer store.Close()
	head, err := store.Head()
	if err != nil {
		return nil, err
	}
	list, err := snapshots.List(snapshots.Dir(dir))
	if err != nil || len(list) == 0 {
		return nil, fmt.Errorf("no snapshot in %s: %v", dir, err)
	}
	cfg := projections.Config{IdempotencyRetentionMs: commands.DefaultConfig().IdempotencyRetention.Milliseconds()}
	if !loadable(list[0].Path, cfg, store) {
		// Written by an older build (format, schema or content): this
		// build's snapshot at the same seq replaces it.
		if err := resnapshot(store, dir, list[0].Seq, cfg); err != nil {
			return nil, err
		}
		if list, err = snapshots.List(snapshots.Dir(dir)); err != nil {
			return nil, err
		}
	}
	return &benchLog{dir: dir, events: head.Seq, snapSeq: list[0].Seq, snapSize: int(list[0].Size), cfg: cfg}, nil
}

// loadable reports whether this build loads the snapshot at path.
func loadable(path string, cfg projections.Config, store *ledger.Store) bool {
	s, err := snapshots.Read(path)
	if err == nil {
		err = snapshots.Check(s, node.SnapshotWant(cfg), store)
	}
	if err == nil {
		_, err = node.RestoreSnapshot(s, cfg)
	}
	s = nil
	debug.FreeOSMemory() // the timed start faults its memory in, as a new process does
	return err == nil
}

// resnapshot replays the log up to seq and writes the snapshot covering it.
func resnapshot(store *ledger.Store, dir string, seq uint64, cfg projections.Config) error {
	st := projections.New(cfg)
	err := store.Range(0, func(e *ledger.Event) error {
		if err := st.Apply(e); err != nil {
			return err
		}
		if e.Seq == seq {
			return ledger.ErrStop
		}
		return nil
	})
	if err != nil {
		return err
	}
	s, err := node.NewSnapshot(st, nil)
	if err != nil {
		return err
	}
	_, err = snapshots.Write(snapshots.Dir(dir), s)
	return err
}

// builder decides commands against projections and appends their events
// in large batches, as the sequencer would, without its goroutine.
type builder struct {
	st        *projections.State
	store     *ledger.Store
	cfg       commands.Config
	now       int64
	head      ledger.Head
	committed ledger.Head
	pending   []*ledger.Event
	soft      []ledger.SoftRecord
}

func (b *builder) do(cmd commands.Command) (commands.Result, error) {
	b.now++
	d, err := cmd.Decide(&commands.Ctx{State: b.st, Now: b.now, Cfg: &b.cfg})
	if err != nil {
		return commands.Result{}, err
	}
	for _, dr := range d.Events {
		body, err := events.EncodeBody(dr.Body)
		if err != nil {
			return commands.Result{}, err
		}
		ev := &ledger.Event{Stream: dr.Stream, StreamVersion: b.st.StreamVersion(dr.Stream) + 1, Type: dr.Type,
			Schema: events.CurrentSchema(dr.Type), At: b.now, Actor: dr.Actor, Idem: dr.Idem, Body: body}
		if b.head, err = ledger.Seal(ev, b.head); err != nil {
			return commands.Result{}, err
		}
		if err := b.st.Apply(ev); err != nil {
			return commands.Result{}, err
		}
		b.pending = append(b.pending, ev)
	}
	b.soft = append(b.soft, d.Soft...)
	if d.Effect != nil {
		d.Effect(b.st)
	}
	var res commands.Result
	if d.Answer != nil {
		res = d.Answer(b.st)
	}
	if len(b.pending) >= 8192 {
		return res, b.flush()
	}
	return res, nil
}

func (b *builder) flush() error {
	if len(b.pending) == 0 && len(b.soft) == 0 {
		return nil
	}
	err := b.store.Append(&ledger.Batch{Expected: b.committed, Events: b.pending, Soft: b.soft})
	b.committed, b.pending, b.soft = b.head, b.pending[:0], b.soft[:0]
	return err
}

func fp(parts ...string) []byte {
	h := sha256.New()
	for _, p := range parts {
		h.Write([]byte(p))
	}
	return h.Sum(nil)
}

const benchPayload = `{"action":"post","app":"com.example.target","text":"hello from the benchmark, a payload of realistic size"}`

func buildBenchLog(dir string, events, tail uint64, mix string) (*benchLog, error) {
	store, err := ledger.Open(dir, ledger.Options{NoSync: true})
	if err != nil {
		return nil, err
	}
	defer store.Close()
	cc := commands.DefaultConfig()
	pcfg := projections.Config{IdempotencyRetentionMs: cc.IdempotencyRetention.Milliseconds()}
	b := &builder{st: projections.New(pcfg), store: store, cfg: cc, now: time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC).UnixMilli(),
		head: ledger.GenesisHead(), committed: ledger.GenesisHead()}
	op := commands.Operator("bench")
	admin := func(name string) commands.AdminReq {
		k := uuid.NewString()
		return commands.AdminReq{Operator: op, Key: k, Fingerprint: fp(name, k)}
	}
	sum := sha256.Sum256([]byte(benchPayload))
	create := func() (string, error) {
		res, err := b.do(&commands.CreateTask{AdminReq: admin(commands.OpCreateTask), Payload: benchPayload,
			PayloadSHA256: fmt.Sprintf("%x", sum), AuthorizeTTL: 24 * time.Hour})
		if err != nil {
			return "", err
		}
		return res.Record.TaskID, nil
	}
	type dev struct {
		p       commands.Principal
		session string
	}
	var devs []dev
	if mix != "tasks" {
		for i := 0; i < 64; i++ {
			res, err := b.do(&commands.RegisterDevice{AdminReq: admin(commands.OpRegisterDevice), OwnerID: uuid.NewString(),
				Name: "bench", TokenHash: commands.HashToken(uuid.NewString())})
			if err != nil {
				return nil, err
			}
			devs = append(devs, dev{p: commands.Principal{DeviceID: res.Record.DeviceID, OwnerID: "o"}, session: uuid.NewString()})
		}
	}
	checks := map[string]bool{"accessibility_connected": true, "target_app_installed": true}
	snapAt := events - min(tail, events)
	snapped := false
	tasks := 0
	var snapSize int
	for i := 0; b.head.Seq < events; i++ {
		if !snapped && b.head.Seq >= snapAt {
			if err := b.flush(); err != nil {
				return nil, err
			}
			s, err := node.NewSnapshot(b.st, nil)
			if err != nil {
				return nil, err
			}
			snapSize = len(s.State)
			if _, err := snapshots.Write(snapshots.Dir(dir), s); err != nil {
				return nil, err
			}
			snapAt, snapped = b.head.Seq, true
		}
		if _, err := create(); err != nil {
			return nil, err
		}
		tasks++
		if mix == "tasks" {
			continue
		}
		d := devs[i%len(devs)]
		if _, err := b.do(&commands.Presence{Device: d.p, Presence: projections.Presence{AppVersion: "1", OSVersion: "a",
			TargetAppVersion: "7", Checks: checks}}); err != nil {
			return nil, err
		}
		key, tok := uuid.NewString(), commands.HashToken(uuid.NewString())
		res, err := b.do(&commands.ClaimNext{Device: d.p, Key: key, Fingerprint: fp(key), SessionID: d.session, TokenHash: tok})
		if err != nil {
			return nil, err
		}
		rec := res.Record
		call := func(op, exec string, version uint64) (*projections.IdemRecord, error) {
			k := uuid.NewString()
			r, err := b.do(&commands.TaskCall{Op: op, Device: d.p, TaskID: rec.TaskID, Key: k, Fingerprint: fp(op, k),
				TokenHash: tok, Generation: rec.Reply.Generation, ExecutionID: exec, Version: version, Step: "working",
				Result: `{"ok":true}`})
			if err != nil {
				return nil, fmt.Errorf("%s: %w", op, err)
			}
			return r.Record, nil
		}
		started, err := call(commands.OpStart, "", rec.Reply.Version)
		if err != nil {
			return nil, err
		}
		ex := started.Reply.ExecutionID
		if _, err := call(commands.OpHeartbeat, ex, 0); err != nil {
			return nil, err
		}
		if _, err := call(commands.OpComplete, ex, started.Reply.Version); err != nil {
			return nil, err
		}
	}
	if err := b.flush(); err != nil {
		return nil, err
	}
	return &benchLog{dir: dir, events: b.head.Seq, snapSeq: snapAt, tasks: tasks, snapSize: snapSize, cfg: pcfg}, nil
}

func openBench(b *testing.B) (*benchLog, *ledger.Store) {
	l := getBenchLog(b)
	store, err := ledger.Open(l.dir, ledger.Options{ReadOnly: true})
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

// BenchmarkReplayFull is the full rebuild: every event decoded and applied.
func BenchmarkReplayFull(b *testing.B) {
	l, store := openBench(b)
	b.ResetTimer()
	c0 := processCPU()
	for i := 0; i < b.N; i++ {
		st, err := projections.Rebuild(store, l.cfg)
		if err != nil || st.Head.Seq != l.events {
			b.Fatalf("rebuild: %v", err)
		}
	}
	cpuMetric(b, processCPU()-c0)
	report(b, l.events)
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
		if err != nil || n != l.events {
			b.Fatalf("scan: %v (%d events)", err, n)
		}
	}
	cpuMetric(b, processCPU()-c0)
	report(b, l.events)
	b.ReportMetric(float64(size)/float64(l.events), "bytes/event")
}

// BenchmarkStartFromSnapshotTail is start-up's load: the newest snapshot
// read, checked (checksum, hash at its seq) and restored, the tail
// replayed, the soft records loaded. Every load starts with the memory
// of the previous one returned to the system, as a new process would.
// The load keeps the garbage collector off (node.pauseGC); the CPU of the
// first collection after it is reported apart (gc-after-cpu-ms/op).
func BenchmarkStartFromSnapshotTail(b *testing.B) {
	l, store := openBench(b)
	b.ReportMetric(float64(l.snapSize), "snapshot-bytes")
	debug.FreeOSMemory()
	b.ResetTimer()
	var used, deferred time.Duration
	for i := 0; i < b.N; i++ {
		c0 := processCPU()
		ld, err := node.LoadProjections(store, l.cfg, zerolog.Nop())
		used += processCPU() - c0
		if err != nil || ld.Snapshot == nil || ld.Snapshot.Seq != l.snapSeq || ld.State.Head.Seq != l.events {
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
	st, err := projections.Rebuild(store, l.cfg)
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
	st, err := projections.Rebuild(store, l.cfg)
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
	st, err := projections.Rebuild(store, l.cfg)
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
		cmd.Env = append(os.Environ(), startChildEnv+"="+l.dir)
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
