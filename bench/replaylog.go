package bench

import (
	"crypto/sha256"
	"fmt"
	"os"
	"runtime/debug"
	"time"

	"github.com/google/uuid"

	"taskledger/commands"
	"taskledger/events"
	"taskledger/ledger"
	"taskledger/node"
	"taskledger/projections"
	"taskledger/snapshots"
)

// The logs of the replay and start-up figures (replay.go, and the
// benchmarks of snapshots/): built by the real command deciders against
// the projections, without HTTP, the sequencer's goroutine or fsync, and
// kept in a directory to be reused.

// The mixes of a replay log.
const (
	// MixLifecycle: 64 devices, then per task create (authorized),
	// presence, claim, start, heartbeat, complete.
	MixLifecycle = "lifecycle"
	// MixTasks: only authorized task.created, one task per event.
	MixTasks = "tasks"
)

// ReplayLog is a generated data directory with a snapshot at SnapSeq.
type ReplayLog struct {
	Dir     string
	Events  uint64 // the log's head seq
	SnapSeq uint64 // the newest snapshot's seq
	// SnapshotBytes is the newest snapshot's file size.
	SnapshotBytes int64
	Cfg           projections.Config
}

// replayLogConfig is the projections' configuration of every replay log:
// the commands' default retention.
func replayLogConfig() projections.Config {
	return projections.Config{IdempotencyRetentionMs: commands.DefaultConfig().IdempotencyRetention.Milliseconds()}
}

// ReplayLogIn returns the log kept in dir, or builds it there (events
// events of mix, a snapshot tail events before the head) when dir holds
// no ledger. A build ends with the task it is at, so a lifecycle log may
// hold a few events more; a kept log must hold as many as a build would.
func ReplayLogIn(dir string, events, tail uint64, mix string) (*ReplayLog, error) {
	if ledger.Exists(dir) {
		l, err := OpenReplayLog(dir)
		if err == nil && (l.Events < events || l.Events > events+eventsPerTask) {
			err = fmt.Errorf("bench: %s holds %d events, not %d", dir, l.Events, events)
		}
		return l, err
	}
	return BuildReplayLog(dir, events, tail, mix)
}

// OpenReplayLog describes a kept replay log. A snapshot an older build
// wrote (format, schema or content) is replaced by this build's at the
// same seq first.
func OpenReplayLog(dir string) (*ReplayLog, error) {
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
	if err != nil {
		return nil, err
	}
	if len(list) == 0 {
		return nil, fmt.Errorf("bench: no snapshot in %s", dir)
	}
	cfg := replayLogConfig()
	if !loadable(list[0].Path, cfg, store) {
		if err := resnapshot(store, dir, list[0].Seq, cfg); err != nil {
			return nil, err
		}
		if list, err = snapshots.List(snapshots.Dir(dir)); err != nil {
			return nil, err
		}
	}
	return &ReplayLog{Dir: dir, Events: head.Seq, SnapSeq: list[0].Seq, SnapshotBytes: list[0].Size, Cfg: cfg}, nil
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
	debug.FreeOSMemory() // a timed start faults its memory in, as a new process does
	return err == nil
}

// resnapshot replays the log up to seq and writes the snapshot covering
// it.
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

// logBuilder decides commands against the projections and appends their
// events in large batches, as the sequencer would, without its goroutine.
type logBuilder struct {
	st        *projections.State
	store     *ledger.Store
	cfg       commands.Config
	now       int64
	head      ledger.Head
	committed ledger.Head
	pending   []*ledger.Event
	soft      []ledger.SoftRecord
}

func (b *logBuilder) do(cmd commands.Command) (commands.Result, error) {
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

func (b *logBuilder) flush() error {
	if len(b.pending) == 0 && len(b.soft) == 0 {
		return nil
	}
	err := b.store.Append(&ledger.Batch{Expected: b.committed, Events: b.pending, Soft: b.soft})
	b.committed, b.pending, b.soft = b.head, b.pending[:0], b.soft[:0]
	return err
}

const replayPayload = `{"action":"post","app":"com.example.target","text":"hello from the benchmark, a payload of realistic size"}`

// BuildReplayLog builds a log of events events of mix in dir (which must
// hold no ledger), with a snapshot tail events before the head.
func BuildReplayLog(dir string, events, tail uint64, mix string) (*ReplayLog, error) {
	if mix != MixLifecycle && mix != MixTasks {
		return nil, fmt.Errorf("bench: unknown log mix %q (want %s or %s)", mix, MixLifecycle, MixTasks)
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, err
	}
	store, err := ledger.Open(dir, ledger.Options{NoSync: true})
	if err != nil {
		return nil, err
	}
	defer store.Close()
	cc := commands.DefaultConfig()
	b := &logBuilder{st: projections.New(replayLogConfig()), store: store, cfg: cc,
		now: time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC).UnixMilli(), head: ledger.GenesisHead(), committed: ledger.GenesisHead()}
	g := &lifecycle{b: b, op: commands.Operator("bench")}
	if mix == MixLifecycle {
		if err := g.registerDevices(64); err != nil {
			return nil, err
		}
	}
	snapAt := events - min(tail, events)
	snapped := false
	var snapSize int64
	for b.head.Seq < events {
		if !snapped && b.head.Seq >= snapAt {
			if err := b.flush(); err != nil {
				return nil, err
			}
			s, err := node.NewSnapshot(b.st, nil)
			if err != nil {
				return nil, err
			}
			path, err := snapshots.Write(snapshots.Dir(dir), s)
			if err != nil {
				return nil, err
			}
			info, err := os.Stat(path)
			if err != nil {
				return nil, err
			}
			snapSize, snapAt, snapped = info.Size(), b.head.Seq, true
		}
		if err := g.next(mix); err != nil {
			return nil, err
		}
	}
	if err := b.flush(); err != nil {
		return nil, err
	}
	return &ReplayLog{Dir: dir, Events: b.head.Seq, SnapSeq: snapAt, SnapshotBytes: snapSize, Cfg: replayLogConfig()}, nil
}

// eventsPerTask is the most events one task of a replay log appends.
const eventsPerTask = 6

// lifecycle generates the commands of a replay log.
type lifecycle struct {
	b    *logBuilder
	op   commands.Operator
	devs []replayDevice
	i    int
}

type replayDevice struct {
	p       commands.Principal
	session string
}

func (g *lifecycle) admin(name string) commands.AdminReq {
	k := uuid.NewString()
	return commands.AdminReq{Operator: g.op, Key: k, Fingerprint: fingerprint(name, k)}
}

func (g *lifecycle) registerDevices(n int) error {
	for range n {
		res, err := g.b.do(&commands.RegisterDevice{AdminReq: g.admin(commands.OpRegisterDevice), OwnerID: uuid.NewString(),
			Name: "bench", TokenHash: commands.HashToken(uuid.NewString())})
		if err != nil {
			return err
		}
		g.devs = append(g.devs, replayDevice{p: commands.Principal{DeviceID: res.Record.DeviceID, OwnerID: "o"},
			session: uuid.NewString()})
	}
	return nil
}

var replayChecks = map[string]bool{"accessibility_connected": true, "target_app_installed": true}

// next creates a task and, in the lifecycle mix, runs it to completion.
func (g *lifecycle) next(mix string) error {
	sum := sha256.Sum256([]byte(replayPayload))
	if _, err := g.b.do(&commands.CreateTask{AdminReq: g.admin(commands.OpCreateTask), Payload: replayPayload,
		PayloadSHA256: fmt.Sprintf("%x", sum), AuthorizeTTL: 24 * time.Hour}); err != nil {
		return err
	}
	if mix == MixTasks {
		return nil
	}
	d := g.devs[g.i%len(g.devs)]
	g.i++
	if _, err := g.b.do(&commands.Presence{Device: d.p, Presence: projections.Presence{AppVersion: "1", OSVersion: "a",
		TargetAppVersion: "7", Checks: replayChecks}}); err != nil {
		return err
	}
	key, tok := uuid.NewString(), commands.HashToken(uuid.NewString())
	res, err := g.b.do(&commands.ClaimNext{Device: d.p, Key: key, Fingerprint: fingerprint(key), SessionID: d.session, TokenHash: tok})
	if err != nil {
		return err
	}
	rec := res.Record
	call := func(op, exec string, version uint64) (*projections.IdemRecord, error) {
		k := uuid.NewString()
		r, err := g.b.do(&commands.TaskCall{Op: op, Device: d.p, TaskID: rec.TaskID, Key: k, Fingerprint: fingerprint(op, k),
			TokenHash: tok, Generation: rec.Reply.Generation, ExecutionID: exec, Version: version, Step: "working",
			Result: `{"ok":true}`})
		if err != nil {
			return nil, fmt.Errorf("%s: %w", op, err)
		}
		return r.Record, nil
	}
	started, err := call(commands.OpStart, "", rec.Reply.Version)
	if err != nil {
		return err
	}
	ex := started.Reply.ExecutionID
	if _, err := call(commands.OpHeartbeat, ex, 0); err != nil {
		return err
	}
	_, err = call(commands.OpComplete, ex, started.Reply.Version)
	return err
}
