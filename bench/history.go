package bench

import (
	"crypto/rand"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"time"

	"github.com/transparency-dev/merkle/compact"
	"github.com/transparency-dev/merkle/rfc6962"

	"taskledger/api"
	"taskledger/audit/checkpoint"
	"taskledger/audit/merkle"
	"taskledger/commands"
	"taskledger/events"
	"taskledger/ledger"
	"taskledger/node"
)

// The synthetic history of `taskledger bench --mode history` (and of
// GenerateHistory's other callers): a ledger of Finished tasks that ran
// their whole lifecycle and Live tasks still open, written without the
// command deciders or the projections. Each event is what the deciders
// write for the same step (TestGeneratedHistoryVerifiesAndContinues
// continues a generated history with the real commands), sealed and hash-chained by the ledger's own
// encoder, committed in batches of historyBatchEvents events per bbolt
// transaction without fsync (one sync at the end), with the Merkle tree
// root computed as it goes (the right edge of the tree only, as
// audit/merkle hashes it) and signed checkpoints stored; `taskledger
// verify` passes on the result. Memory stays flat: nothing is kept per
// task.

// HistoryConfig sizes a generated history.
type HistoryConfig struct {
	Dir      string // the data directory (must hold no ledger)
	Finished int    // tasks run to a terminal state
	Live     int    // open tasks at the end: one CLAIMED or RUNNING per device at most, the rest PENDING
	Devices  int    // devices that claim the tasks (default 64)
	// PerDay is how many tasks finish per day (default 100,000): the
	// history spans Finished/PerDay days, so idempotency records expire
	// across it as they do on a real node. At most 432,000 (tasks are at
	// least 200 ms apart: their own events span 140 ms).
	PerDay int
	// End is the time of the newest event (the zero value: 2026-01-01).
	End time.Time
	// batch and checkpointEvery (tests): events per transaction (at least
	// this many, whole tasks) and between signed checkpoints.
	batch, checkpointEvery int
}

// History describes a generated history.
type History struct {
	Dir        string
	Events     uint64 // the log's head seq
	Finished   int
	Live       int
	Devices    []string // device ids, in registration order
	AdminToken string   // the "initial" admin token (also in Dir/initial-admin-token)
	Outcomes   map[string]int
	Took       time.Duration // wall time of the generation, the final sync included
	CPU        time.Duration // the process's CPU time meanwhile
	FileBytes  int64         // taskledger.db
}

// The generator's fixed choices.
const (
	historyBatchEvents = 16384 // events per bbolt transaction
	historyCheckpoints = 1 << 20
	historyOperator    = "initial"
	historyAuthTTL     = 24 * time.Hour
	historyClaimLease  = 10 * time.Minute
	historyExecLease   = 90 * time.Second
)

// historyChecks are the presence checks of every claim (the server's
// required checks by default).
var historyChecks = map[string]bool{"accessibility_connected": true, "target_app_installed": true}

var historyRequired = []string{"accessibility_connected", "target_app_installed"}

// ErrHistoryExists is a generation into a directory that holds a ledger.
var ErrHistoryExists = errors.New("bench: the directory already holds a ledger")

// errHistoryWriter stops the generation when the writer failed (run
// returns the writer's own error).
var errHistoryWriter = errors.New("bench: the history's writer failed")

// GenerateHistory writes a history of cfg's size into cfg.Dir.
func GenerateHistory(cfg HistoryConfig) (*History, error) {
	if cfg.Finished < 0 || cfg.Live < 0 {
		return nil, fmt.Errorf("bench: history sizes must not be negative (finished %d, live %d)", cfg.Finished, cfg.Live)
	}
	if cfg.Devices == 0 {
		cfg.Devices = 64
	}
	if cfg.Devices < 1 {
		return nil, fmt.Errorf("bench: a history needs at least one device (got %d)", cfg.Devices)
	}
	if cfg.PerDay <= 0 {
		cfg.PerDay = 100_000
	}
	if cfg.batch <= 0 {
		cfg.batch = historyBatchEvents
	}
	if cfg.checkpointEvery <= 0 {
		cfg.checkpointEvery = historyCheckpoints
	}
	if cfg.End.IsZero() {
		cfg.End = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	}
	if ledger.Exists(cfg.Dir) {
		return nil, fmt.Errorf("%w: %s", ErrHistoryExists, cfg.Dir)
	}
	cpu0, t0 := processCPU(), time.Now()
	store, err := ledger.Open(cfg.Dir, ledger.Options{NoSync: true})
	if err != nil {
		return nil, err
	}
	g, err := newHistoryGen(store, cfg)
	if err != nil {
		store.Close()
		return nil, err
	}
	err = g.run()
	if cerr := store.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return nil, err
	}
	// The store ran without fsync: one sync of the whole file now, so the
	// history is durable before anyone measures it.
	if err := syncFile(filepath.Join(cfg.Dir, ledger.FileName)); err != nil {
		return nil, err
	}
	info, err := os.Stat(filepath.Join(cfg.Dir, ledger.FileName))
	if err != nil {
		return nil, err
	}
	return &History{Dir: cfg.Dir, Events: g.head.Seq, Finished: cfg.Finished, Live: cfg.Live, Devices: g.deviceIDs(),
		AdminToken: g.token, Outcomes: g.outcomes, Took: time.Since(t0), CPU: processCPU() - cpu0, FileBytes: info.Size()}, nil
}

func syncFile(path string) error {
	f, err := os.OpenFile(path, os.O_RDWR, 0)
	if err != nil {
		return err
	}
	return errors.Join(f.Sync(), f.Close())
}

// historyGen writes the events. It seals batches while a writer
// goroutine commits the previous one and extends the Merkle tree with it
// (two batches in flight at most).
type historyGen struct {
	cfg      HistoryConfig
	store    *ledger.Store
	key      *checkpoint.Key
	tree     *compact.Range // the Merkle tree's right edge: its root at every size, no node kept
	ids      *idSource
	token    string
	head     ledger.Head
	now      int64 // time of the next event, Unix ms
	step     int64 // ms between two tasks
	cur      *historyBatch
	free     chan *historyBatch
	work     chan *historyBatch
	done     chan error    // the writer's error, when it ended
	failed   chan struct{} // closed when a commit failed
	signedAt uint64        // writer's
	devs     []historyDevice
	outcomes map[string]int
}

// historyBatch is one bbolt transaction's events.
type historyBatch struct {
	base    ledger.Head // the head it continues
	events  []*ledger.Event
	encoded [][]byte
	leaves  [][]byte
	scratch []ledger.Event // the envelopes, reused
}

type historyDevice struct {
	id, owner, session string
}

func newHistoryGen(store *ledger.Store, cfg HistoryConfig) (*historyGen, error) {
	ids, err := newIDSource()
	if err != nil {
		return nil, err
	}
	key, _, err := checkpoint.LoadOrCreateKey(cfg.Dir)
	if err != nil {
		return nil, err
	}
	// The "initial" admin token, as a node's first start writes it.
	tok, err := api.NewAdminToken()
	if err != nil {
		return nil, err
	}
	if err := os.WriteFile(filepath.Join(cfg.Dir, node.InitialTokenFile), []byte(tok+"\n"), 0o600); err != nil {
		return nil, err
	}
	h := sha256.Sum256([]byte(tok))
	if err := store.PutAdminToken(historyOperator, h[:]); err != nil {
		return nil, err
	}
	// The history ends at End: finished tasks one step apart before the
	// live ones, which come last, one per 200 ms.
	day := int64(24 * time.Hour / time.Millisecond)
	step := day / int64(cfg.PerDay)
	step = max(step, 200) // a task's own events span 140 ms
	span := step*int64(cfg.Finished) + 200*int64(cfg.Live) + int64(cfg.Devices) + 10_000
	g := &historyGen{cfg: cfg, store: store, key: key,
		tree: (&compact.RangeFactory{Hash: rfc6962.DefaultHasher.HashChildren}).NewEmptyRange(0), ids: ids, token: tok,
		head: ledger.GenesisHead(), now: cfg.End.UnixMilli() - span, step: step, outcomes: map[string]int{},
		free: make(chan *historyBatch, 2), work: make(chan *historyBatch, 1), done: make(chan error, 1), failed: make(chan struct{})}
	for range 2 {
		g.free <- &historyBatch{scratch: make([]ledger.Event, cfg.batch+8)}
	}
	g.cur = <-g.free
	g.cur.base = g.head
	return g, nil
}

func (g *historyGen) deviceIDs() []string {
	out := make([]string, len(g.devs))
	for i, d := range g.devs {
		out[i] = d.id
	}
	return out
}

func (g *historyGen) run() error {
	go g.write()
	err := g.generate()
	if err == nil {
		err = g.flush()
	}
	close(g.work)
	if werr := <-g.done; werr != nil {
		err = werr // the writer's error, not errHistoryWriter
	}
	if err != nil {
		return err
	}
	return g.sign()
}

// write commits the batches in order; after a failure it only drains.
func (g *historyGen) write() {
	var err error
	for b := range g.work {
		if err == nil {
			if err = g.commit(b); err != nil {
				close(g.failed)
			}
		}
		b.events, b.encoded, b.leaves = b.events[:0], b.encoded[:0], b.leaves[:0]
		clear(b.scratch)
		g.free <- b
	}
	g.done <- err
}

func (g *historyGen) commit(b *historyBatch) error {
	if err := g.store.Append(&ledger.Batch{Expected: b.base, Events: b.events, Encoded: b.encoded}); err != nil {
		return err
	}
	for _, h := range b.leaves {
		if err := g.tree.Append(h, nil); err != nil {
			return err
		}
	}
	if g.tree.End()-g.signedAt >= uint64(g.cfg.checkpointEvery) {
		return g.sign()
	}
	return nil
}

func (g *historyGen) generate() error {
	for range g.cfg.Devices {
		if err := g.register(); err != nil {
			return err
		}
	}
	for i := range g.cfg.Finished {
		if err := g.finished(i); err != nil {
			return err
		}
	}
	// Live: the first tasks are taken by one device each (every other one
	// started), the rest wait.
	for i := range g.cfg.Live {
		at := g.now
		g.now += 200
		var err error
		switch {
		case i < len(g.devs) && i%2 == 0:
			err = g.live(i, at, true)
		case i < len(g.devs):
			err = g.live(i, at, false)
		default:
			if _, _, err = g.create(at); err == nil {
				g.outcomes[string(events.EvTaskCreated)]++
				err = g.endTask()
			}
		}
		if err != nil {
			return err
		}
	}
	return nil
}

// emit seals one event onto the pending batch.
func (g *historyGen) emit(stream string, version uint64, typ events.Type, at int64, actor ledger.Actor, idem *ledger.Idem, body any) error {
	b := g.cur
	e := &b.scratch[len(b.events)]
	*e = ledger.Event{Stream: stream, StreamVersion: version, Type: ledger.EventType(typ), Schema: events.CurrentSchema(typ),
		At: at, Actor: actor, Idem: idem}
	head, raw, err := ledger.SealBody(e, g.head, body, events.AppendBody)
	if err != nil {
		return err
	}
	g.head = head
	b.events = append(b.events, e)
	b.encoded = append(b.encoded, raw)
	b.leaves = append(b.leaves, merkle.LeafHash(raw))
	return nil
}

// endTask flushes when the batch is full (a task's events never straddle
// two batches: no batch is left with a half-written task).
func (g *historyGen) endTask() error {
	if len(g.cur.events) >= g.cfg.batch {
		return g.flush()
	}
	return nil
}

// flush hands the batch to the writer and takes the next free one (an
// error of the writer's ends the generation).
func (g *historyGen) flush() error {
	if len(g.cur.events) == 0 {
		return nil
	}
	select {
	case g.work <- g.cur:
	case <-g.failed:
		return errHistoryWriter
	}
	g.cur = <-g.free
	g.cur.base = g.head
	return nil
}

// sign stores a signed checkpoint of the tree's size, stamped with the
// newest committed event's time (the writer's, or after it ended).
func (g *historyGen) sign() error {
	size := g.tree.End()
	if size == 0 || size == g.signedAt {
		return nil
	}
	root, err := g.tree.GetRootHash(nil)
	if err != nil {
		return err
	}
	head, err := g.store.Head()
	if err != nil {
		return err
	}
	signed, err := g.key.Sign(checkpoint.Checkpoint{Size: size, Root: root, Time: head.At})
	if err != nil {
		return err
	}
	g.signedAt = size
	return g.store.PutCheckpoint(size, signed)
}

func (g *historyGen) operator(op string) (ledger.Actor, *ledger.Idem) {
	return ledger.Actor{Kind: ledger.ActorOperator, ID: historyOperator},
		g.idem("operator:"+historyOperator+":"+op, op)
}

func (g *historyGen) device(d historyDevice, op string) (ledger.Actor, *ledger.Idem) {
	return ledger.Actor{Kind: ledger.ActorDevice, ID: d.id, Owner: d.owner}, g.idem("device:"+d.id+":"+op, op)
}

func (g *historyGen) idem(scope, op string) *ledger.Idem {
	k := g.ids.next()
	fp := sha256.Sum256([]byte(op + "\x00" + k))
	return &ledger.Idem{Scope: scope, Key: k, Fingerprint: fp[:]}
}

func (g *historyGen) register() error {
	d := historyDevice{id: g.ids.next(), owner: g.ids.next(), session: g.ids.next()}
	actor, idem := g.operator(commands.OpRegisterDevice)
	at := g.now
	g.now++
	tok := commands.HashToken(g.ids.next())
	if err := g.emit(events.DeviceStream(d.id), 1, events.EvDeviceRegistered, at, actor, idem,
		&events.DeviceRegistered{DeviceID: d.id, OwnerID: d.owner, Name: "bench-" + strconv.Itoa(len(g.devs)), TokenHash: tok}); err != nil {
		return err
	}
	g.devs = append(g.devs, d)
	return g.endTask()
}

// create writes task.created with its authorization (create-task with a
// TTL) and returns the task id and authorization.
func (g *historyGen) create(at int64) (string, events.AuthBody, error) {
	id := g.ids.next()
	payload := `{"action":"post","app":"com.example.target","text":"history task ` + id + `"}`
	sum := sha256.Sum256([]byte(payload))
	psum := hex.EncodeToString(sum[:])
	auth := events.AuthBody{ID: g.ids.next(), Revision: 1, PayloadSHA256: psum, ExpiresAt: at + historyAuthTTL.Milliseconds()}
	actor, idem := g.operator(commands.OpCreateTask)
	a := auth
	err := g.emit(events.TaskStream(id), 1, events.EvTaskCreated, at, actor, idem,
		&events.TaskCreated{TaskID: id, Payload: payload, PayloadSHA256: psum, Authorization: &a, Takeover: "reclaim"})
	return id, auth, err
}

// running is a task claimStart wrote.
type running struct {
	id, exec   string
	d          historyDevice
	version    uint64 // the task's version
	streamVer  uint64
	lease      int64
	at         int64 // time of the last event
	generation uint64
}

// claimStart writes create, claim and (when start) start and a first
// heartbeat for device d.
func (g *historyGen) claimStart(d historyDevice, at int64, start bool) (*running, error) {
	id, auth, err := g.create(at)
	if err != nil {
		return nil, err
	}
	stream := events.TaskStream(id)
	r := &running{id: id, d: d, version: 2, streamVer: 2, generation: 1, at: at + 20}
	actor, idem := g.device(d, commands.OpClaimNext)
	if err := g.emit(stream, 2, events.EvTaskClaimed, r.at, actor, idem, &events.TaskClaimed{
		TaskID: id, DeviceID: d.id, SessionID: d.session, Generation: 1, Version: 2, TokenOrigin: events.TokenClient,
		TokenHash: commands.HashToken(HistoryClaimToken(id)), AuthorizationID: auth.ID, AuthorizationExpiresAt: auth.ExpiresAt,
		LeaseExpiresAt: r.at + historyClaimLease.Milliseconds(),
		Presence: &events.PresenceSnapshot{ReceivedAt: r.at - 10, AppVersion: "1", OSVersion: "a", TargetAppVersion: "7",
			Checks: historyChecks, RequiredChecks: historyRequired}}); err != nil {
		return nil, err
	}
	if !start {
		return r, nil
	}
	r.at += 20
	r.exec, r.version, r.streamVer = g.ids.next(), 3, 3
	r.lease = r.at + historyExecLease.Milliseconds()
	actor, idem = g.device(d, commands.OpStart)
	if err := g.emit(stream, 3, events.EvTaskStarted, r.at, actor, idem, &events.TaskStarted{TaskID: id, DeviceID: d.id,
		Generation: 1, ExecutionID: r.exec, AuthorizationID: auth.ID, LeaseExpiresAt: r.lease, Version: 3}); err != nil {
		return nil, err
	}
	r.at += 20
	prev := r.lease
	r.lease, r.streamVer = r.at+historyExecLease.Milliseconds(), 4
	actor, idem = g.device(d, commands.OpHeartbeat)
	err = g.emit(stream, 4, events.EvTaskHeartbeat, r.at, actor, idem, &events.TaskHeartbeat{TaskID: id, DeviceID: d.id,
		Generation: 1, ExecutionID: r.exec, PreviousExpiresAt: prev, LeaseExpiresAt: r.lease, Step: "working"})
	return r, err
}

// finished writes the i-th finished task: created, claimed by device
// i mod K, started, a heartbeat, and its outcome: of every 20 tasks, 17
// succeed, 2 fail and 1 is canceled while it runs (cancel requested by
// the operator, then acknowledged by the device).
func (g *historyGen) finished(i int) error {
	at := g.now
	g.now += g.step
	d := g.devs[i%len(g.devs)]
	r, err := g.claimStart(d, at, true)
	if err != nil {
		return err
	}
	stream := events.TaskStream(r.id)
	at = r.at + 30
	switch i % 20 {
	case 5, 13: // failed
		actor, idem := g.device(d, commands.OpFail)
		err = g.emit(stream, 5, events.EvTaskFailed, at, actor, idem, &events.TaskFailed{TaskID: r.id, DeviceID: d.id,
			Generation: 1, ExecutionID: r.exec, Version: 4, ReasonCode: "app_crashed", Detail: "the target app stopped",
			LeaseExpiresAt: r.lease})
		g.outcomes[string(events.EvTaskFailed)]++
	case 17: // canceled: requested by the operator, acknowledged by the device
		actor, idem := g.operator(commands.OpCancel)
		if err := g.emit(stream, 5, events.EvTaskCancelRequested, at, actor, idem,
			&events.TaskCancelRequested{TaskID: r.id, Reason: "operator"}); err != nil {
			return err
		}
		actor, idem = g.device(d, commands.OpCancelAck)
		err = g.emit(stream, 6, events.EvTaskCanceled, at+20, actor, idem, &events.TaskCanceled{TaskID: r.id, By: "device",
			Reason: "operator", DeviceID: d.id, Generation: 1, ExecutionID: r.exec, Version: 4, LeaseExpiresAt: r.lease})
		g.outcomes[string(events.EvTaskCanceled)]++
	default:
		actor, idem := g.device(d, commands.OpComplete)
		err = g.emit(stream, 5, events.EvTaskCompleted, at, actor, idem, &events.TaskCompleted{TaskID: r.id, DeviceID: d.id,
			Generation: 1, ExecutionID: r.exec, Version: 4, Result: `{"ok":true}`, LeaseExpiresAt: r.lease})
		g.outcomes[string(events.EvTaskCompleted)]++
	}
	if err != nil {
		return err
	}
	return g.endTask()
}

// live writes an open task held by device i: CLAIMED, or RUNNING when
// started.
func (g *historyGen) live(i int, at int64, started bool) error {
	if _, err := g.claimStart(g.devs[i], at, started); err != nil {
		return err
	}
	if started {
		g.outcomes[string(events.EvTaskStarted)]++
	} else {
		g.outcomes[string(events.EvTaskClaimed)]++
	}
	return g.endTask()
}

// HistoryClaimToken is the claim token a generated history's claim of
// task id was made with (client-issued; derived from the id so that a
// test can continue the claim with the real commands).
func HistoryClaimToken(taskID string) string { return "history-claim-" + taskID }

// idSource issues ids in the shape of a UUIDv4 (the API checks it): 64
// random bits drawn once per history, then a counter.
type idSource struct {
	prefix [8]byte
	n      uint64
	buf    [16]byte
}

func newIDSource() (*idSource, error) {
	s := &idSource{}
	if _, err := rand.Read(s.prefix[:]); err != nil {
		return nil, err
	}
	return s, nil
}

func (s *idSource) next() string {
	s.n++
	copy(s.buf[:8], s.prefix[:])
	binary.BigEndian.PutUint64(s.buf[8:], s.n)
	s.buf[6] = s.buf[6]&0x0f | 0x40 // version 4
	s.buf[8] = s.buf[8]&0x3f | 0x80 // variant 10
	var out [36]byte
	hex.Encode(out[0:8], s.buf[0:4])
	out[8] = '-'
	hex.Encode(out[9:13], s.buf[4:6])
	out[13] = '-'
	hex.Encode(out[14:18], s.buf[6:8])
	out[18] = '-'
	hex.Encode(out[19:23], s.buf[8:10])
	out[23] = '-'
	hex.Encode(out[24:36], s.buf[10:16])
	return string(out[:])
}
