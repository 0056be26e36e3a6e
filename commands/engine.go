package commands

import (
	"context"
	"sync"
	"sync/atomic"
	"time"

	"github.com/rs/zerolog"

	"taskledger/ledger"
	"taskledger/projections"
)

// Log is the write side of the ledger the sequencer needs.
type Log interface {
	Append(b *ledger.Batch) error
}

// PipelinedLog is a Log that can start a batch's append before the
// previous one is acknowledged (ledger/jetstream): Start publishes b and
// returns the wait for its outcome. The committer calls the waits in the
// order of the Starts; a batch started on top of one that fails must fail
// too (the stream refuses it: it expects the failed batch's sequence).
type PipelinedLog interface {
	Log
	Start(b *ledger.Batch) (wait func() error)
}

// DefaultPipelineDepth is how many batches a PipelinedLog may have in
// flight at once (published, not yet acknowledged).
const DefaultPipelineDepth = 2

// DefaultGatherMax bounds how long a batch waits for the callers the
// previous commit answered (Options.GatherMax; see gather in pipeline.go).
const DefaultGatherMax = 10 * time.Millisecond

// Loader rebuilds the projections from the log on disk (after a failed
// commit).
type Loader func() (*projections.State, error)

// Metrics receives the sequencer's measurements; nil fields are skipped.
type Metrics struct {
	BatchCommitted func(commands int, events int, commit time.Duration)
	// CommitFailed: a batch's append (write or fsync) failed; its commands
	// are answered 503.
	CommitFailed func(err error)
	Command      func(cmd Command, res Result, err error)
	Claimed      func()
	// Phases, when set, is told where each command answered after a
	// commit spent its time (benchmarks; it costs five clock reads per
	// command and three per batch). It runs on the caller's goroutine,
	// in Do.
	Phases func(Phases)
}

// Phases is one command's time from Do to its caller running again.
type Phases struct {
	Queued  time.Duration // Do queued it → the sequencer began deciding it
	Decide  time.Duration // its decision (stamp, seal, apply)
	Wait    time.Duration // decided → its batch's commit began (the batch in flight, the rest of its own batch)
	Commit  time.Duration // its batch's Append (one transaction, one fsync)
	Publish time.Duration // the commit's hooks (failpoints, authentication index, committed hook, test clock), the hand-off to the answering goroutine and the Merkle leaves
	Answer  time.Duration // the leaves are in the tree → its answer was signalled
	Wake    time.Duration // its answer was signalled → the caller ran again
}

// TypeName is a command's type for metrics and logs.
func TypeName(cmd Command) string {
	switch c := cmd.(type) {
	case *TaskCall:
		return c.Op
	case *ClaimNext:
		return OpClaimNext
	case *Presence:
		return "presence"
	case *RegisterDevice:
		return OpRegisterDevice
	case *RevokeDevice:
		return OpRevokeDevice
	case *CreateTask:
		return OpCreateTask
	case *Amend:
		return OpAmend
	case *SetReferenceImage:
		return OpSetReferenceImage
	case *Authorize:
		return OpAuthorize
	case *RevokeAuthorization:
		return OpRevokeAuthorization
	case *Cancel:
		return OpCancel
	case *Recover:
		return OpRecover
	case *AdvanceClock:
		return "test-clock-advance"
	case *CollectSoft:
		return "collect-soft"
	}
	return "other"
}

// Engine is the sequencer: one goroutine owns the projections and decides
// every command against them, in order (seeing the earlier decisions,
// committed or not), stamping and chaining the events; a committer
// goroutine writes each batch in one transaction (one fsync) and only
// then answers its commands. The two overlap: while batch N commits, the
// sequencer decides every command that arrives into batch N+1, which is
// handed to the committer when N has committed (see pipeline.go).
type Engine struct {
	log     Log
	load    Loader
	clock   Clock
	cfg     Config
	metrics Metrics
	logger  zerolog.Logger

	in        chan *request
	exclusive chan *exclusive // Exclusive's functions, run when nothing is uncommitted
	stop      chan struct{}
	done      chan struct{}
	maxBatch  int
	depth     int // batches in flight at most: 1, or PipelineDepth on a PipelinedLog
	gatherMax time.Duration

	// mu guards state. The sequencer holds it for writing whenever the
	// projections hold a decided event that is not committed yet: from the
	// first decision after the pipeline was empty until every batch decided
	// since has committed (or the projections were reloaded). So readers
	// only ever see committed state. readers counts those waiting for it:
	// the sequencer then stops deciding until the pipeline is empty.
	mu          sync.RWMutex
	readers     atomic.Int32
	readerWaits chan struct{} // a reader began waiting (gather stops waiting for callers)
	state       *projections.State
	failed      atomic.Pointer[failure] // the log cannot be written: fenced, or reload failed

	fenced    chan struct{} // closed by fence
	fenceOnce sync.Once

	// Owned by the sequencer goroutine.
	head          ledger.Head   // after the newest decided event
	pendingManual *int64        // the test clock's newest decided, uncommitted value
	pendingJob    *job          // the batch that decided pendingManual
	gen           uint64        // failed batches so far: a job carries the count it was handed off at
	gatherTo      int           // after a commit, the commands the next batch waits to hold (0: it does not wait; gather)
	gatherUntil   time.Time     // until when it waits, unless callers are still arriving then
	gatherLull    time.Duration // past gatherUntil, it waits on while the last caller came less than this ago
	gatherCap     time.Time     // and never past this

	captures  chan *captureReq // CaptureDecided → sequencer
	commits   chan *job        // sequencer → committer, in order
	results   chan error       // committer → sequencer, the outcome of each batch, in order
	committed chan struct{}    // closed when the committer stopped
	sequenced atomic.Uint64

	auth authIndex // token hash → active device, as committed

	manual *ManualClock // the test clock, when serving with --clock=manual

	committedHook func(head ledger.Head, events []*ledger.Event, bodies []any)
	leavesHook    func(first uint64, raws, hashes [][]byte)
	leafHash      func(raw []byte) []byte
	hashers       sync.WaitGroup // hashLeaves goroutines
	readModel     bool           // batches carry the read-model writes their events make

	closeMu sync.RWMutex // senders hold it for reading while they enqueue
	closed  bool
}

type failure struct{ err error }

type request struct {
	cmd   Command
	res   Result
	err   error
	done  chan struct{} // capacity 1: signaled once per use
	timed bool          // Metrics.Phases is set: t is filled in
	t     phaseTimes
}

// phaseTimes are a request's timestamps for Metrics.Phases.
type phaseTimes struct {
	queued, decideStart, decided, commitStart, committed, published, answered time.Time
}

// requests are reused: the engine never touches one after signaling done.
var requestPool = sync.Pool{New: func() any { return &request{done: make(chan struct{}, 1)} }}

// Options configure an Engine.
type Options struct {
	Log      Log
	Load     Loader
	State    *projections.State
	Clock    Clock
	Manual   *ManualClock
	Config   Config
	Metrics  Metrics
	Logger   zerolog.Logger
	MaxBatch int
	// PipelineDepth bounds the batches in flight on a PipelinedLog
	// (default DefaultPipelineDepth; 1 turns pipelining off). Any other
	// Log has one batch in flight.
	PipelineDepth int
	// GatherMax bounds how long the next batch waits, after a commit, for
	// the callers that commit answered to send their next command, so that
	// they join it instead of waiting for the commit after it: at most
	// the commit's own duration, and at most GatherMax (default
	// DefaultGatherMax; negative: never). Only a pipeline of depth 1
	// waits (any Log but a PipelinedLog, or one with PipelineDepth 1).
	GatherMax time.Duration
	// Committed, when set, is called after every commit that appended
	// events, with the new head, those events and their bodies (bodies[i]
	// is what events.DecodeBody returns for events[i]; the hook must
	// not change them), before the sequencer learns of the commit and
	// before any command of the batch is answered. It runs on the
	// committer goroutine while the sequencer may hold the projections'
	// write lock: it must return at once and must not call Read
	// (snapshots and metrics hand the work elsewhere).
	Committed func(head ledger.Head, events []*ledger.Event, bodies []any)
	// Leaves, when set, is called after every commit that appended events,
	// after Committed and before any command of the batch is answered,
	// with the first event's seq and every event's stored bytes in seq
	// order (the Merkle tree over the log grows here). It runs on the
	// answering goroutine, in commit order, while the next batch commits:
	// readers may see the batch's events in the projections and the log
	// before the tree holds them (the tree fills itself from the log when
	// asked past its size), but no command of the batch is answered
	// before. The bytes must not change. hashes holds each leaf's hash
	// (LeafHash of its bytes) when LeafHash is set, else it is nil.
	Leaves func(first uint64, raws, hashes [][]byte)
	// LeafHash, when set with Leaves, hashes a batch's leaves on a
	// goroutine started when the batch is handed to the committer, so
	// they are hashed while it commits rather than between its commit and
	// its answers; Leaves gets the hashes. It must be the hash the Leaves
	// hook's tree gives a leaf (a node wires both from one
	// transparency.Log) and safe to call from any goroutine.
	LeafHash func(raw []byte) []byte
	// ReadModel makes every batch that appends events carry the writes of
	// the on-disk read model of finished tasks its newest event makes
	// (projections.State.TakeReadModel), in the same transaction. Only a
	// log that keeps one (the bbolt file) sets it; the loaded state's
	// settled tasks must be on disk already (State.SettleLoaded), and so
	// must those of every state Load returns.
	ReadModel bool
}

// NewEngine starts the sequencer over a loaded state.
func NewEngine(o Options) *Engine {
	if o.MaxBatch <= 0 {
		o.MaxBatch = 4096
	}
	e := &Engine{log: o.Log, load: o.Load, clock: o.Clock, cfg: o.Config, metrics: o.Metrics, logger: o.Logger,
		in: make(chan *request, o.MaxBatch), exclusive: make(chan *exclusive), stop: make(chan struct{}), done: make(chan struct{}),
		maxBatch: o.MaxBatch, state: o.State, head: o.State.Head, manual: o.Manual, committedHook: o.Committed, leavesHook: o.Leaves, leafHash: o.LeafHash, readModel: o.ReadModel,
		captures: make(chan *captureReq), readerWaits: make(chan struct{}, 1), fenced: make(chan struct{}), commits: make(chan *job, 1), results: make(chan error, 1), committed: make(chan struct{})}
	if o.Manual != nil {
		e.clock = o.Manual
	}
	e.depth = 1
	e.gatherMax = o.GatherMax
	if e.gatherMax == 0 {
		e.gatherMax = DefaultGatherMax
	}
	if _, ok := o.Log.(PipelinedLog); ok {
		e.depth = o.PipelineDepth
		if e.depth <= 0 {
			e.depth = DefaultPipelineDepth
		}
	}
	e.auth.load(o.State, o.Config.OutsideAdminTokens)
	go e.committer()
	go e.run()
	return e
}

// Config returns the engine's configuration.
func (e *Engine) Config() *Config { return &e.cfg }

// Manual returns the test clock, or nil.
func (e *Engine) Manual() *ManualClock { return e.manual }

// Do submits a command and waits for its answer (after its batch
// committed).
func (e *Engine) Do(ctx context.Context, cmd Command) (Result, error) {
	r := requestPool.Get().(*request)
	r.cmd = cmd
	if e.metrics.Phases != nil {
		r.timed, r.t.queued = true, time.Now() //tl:wallclock phase metric
	}
	e.closeMu.RLock()
	if e.closed {
		e.closeMu.RUnlock()
		release(r)
		return Result{}, ErrShuttingDown
	}
	select {
	case e.in <- r:
	case <-ctx.Done():
		e.closeMu.RUnlock()
		release(r)
		return Result{}, ctx.Err()
	}
	e.closeMu.RUnlock()
	// Once queued, the answer always comes: the batch commits or fails.
	<-r.done
	if r.timed && !r.t.committed.IsZero() {
		e.metrics.Phases(r.t.phases(time.Now())) //tl:wallclock phase metric
	}
	res, err := r.res, r.err
	release(r)
	return res, err
}

func (t *phaseTimes) phases(woke time.Time) Phases {
	return Phases{Queued: t.decideStart.Sub(t.queued), Decide: t.decided.Sub(t.decideStart),
		Wait: t.commitStart.Sub(t.decided), Commit: t.committed.Sub(t.commitStart),
		Publish: t.published.Sub(t.committed), Answer: t.answered.Sub(t.published), Wake: woke.Sub(t.answered)}
}

func release(r *request) {
	*r = request{done: r.done}
	requestPool.Put(r)
}

// Authenticate returns the ACTIVE device whose token hashes to tokenHash
// (hex SHA-256), as of the newest commit. It never waits for the
// sequencer: the committer updates the index after each commit, before
// answering any command of the batch, so a registration or revocation
// holds for every request authenticated after it was answered. (Commands
// check that the device is still ACTIVE again when they are decided.)
func (e *Engine) Authenticate(tokenHash string) (Principal, bool) {
	return e.auth.lookup(tokenHash)
}

// AuthenticateAdmin returns the name and role of the active admin token
// whose hash is tokenHash, as of the newest commit (like Authenticate, it never
// waits for the sequencer: a token created or revoked is honoured, or
// refused, from the moment its command is answered).
func (e *Engine) AuthenticateAdmin(tokenHash string) (AdminIdentity, bool) {
	return e.auth.lookupAdmin(tokenHash)
}

// Read runs fn with the committed projections under a read lock.
func (e *Engine) Read(fn func(s *projections.State)) {
	e.rlock()
	defer e.mu.RUnlock()
	fn(e.state)
}

// ReadNow runs fn with the committed projections and the server time a
// read at this moment sees.
func (e *Engine) ReadNow(fn func(s *projections.State, now int64)) {
	e.rlock()
	defer e.mu.RUnlock()
	fn(e.state, e.nowLocked())
}

// Now returns the server time a read at this moment sees: the clock, never
// below the committed head, in ms.
func (e *Engine) Now() int64 {
	e.rlock()
	defer e.mu.RUnlock()
	return e.nowLocked()
}

// rlock takes the read lock, telling the sequencer a reader waits.
func (e *Engine) rlock() {
	e.readers.Add(1)
	select {
	case e.readerWaits <- struct{}{}:
	default:
	}
	e.mu.RLock()
	e.readers.Add(-1)
}

func (e *Engine) nowLocked() int64 { return e.timeAt(e.state.Head.At) }

// timeAt reads the clock once: ledger time, never below head (the newest
// event's time). A clock behind head is raised to it when it can be
// (SteadyClock.Floor), so time goes on from head instead of standing
// still until the clock catches up.
func (e *Engine) timeAt(head int64) int64 {
	now := Ms(e.clock.Now())
	if now < head {
		if f, ok := e.clock.(interface{ Floor(time.Time) }); ok {
			f.Floor(time.UnixMilli(head))
		}
		now = head
	}
	return now
}

// Fenced is closed when a write or sync of the log failed: the engine
// then acknowledges nothing more (Err is ErrFenced), and the process must
// exit so that it restarts and reads the log from disk.
func (e *Engine) Fenced() <-chan struct{} { return e.fenced }

// Err reports why the engine stopped accepting commands, if it did.
func (e *Engine) Err() error {
	if f := e.failed.Load(); f != nil {
		return f.err
	}
	return nil
}

// Close stops accepting commands, finishes the batches decided and in
// flight, and answers everything still queued with ErrShuttingDown.
func (e *Engine) Close() {
	e.closeMu.Lock()
	first := !e.closed
	e.closed = true
	e.closeMu.Unlock()
	if first {
		close(e.stop) // no sender is between its check and its enqueue now
	}
	<-e.done
}
