package commands

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/rs/zerolog"

	"taskledger/ledger"
	"taskledger/projections"
)

// Log is the write side of the ledger the sequencer needs.
type Log interface {
	Append(b *ledger.Batch) error
}

// Loader rebuilds the projections from the log on disk (after a failed
// commit).
type Loader func() (*projections.State, error)

// Metrics receives the sequencer's measurements; nil fields are skipped.
type Metrics struct {
	BatchCommitted func(commands int, events int, commit time.Duration)
	Command        func(cmd Command, res Result, err error)
	Claimed        func()
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
	}
	return "other"
}

// Engine is the sequencer: one goroutine owns the projections and the
// log's write side. It takes a batch of commands, decides each against the
// projections (seeing the batch's earlier decisions), stamps and chains the
// events, commits them in one transaction (one fsync), and only then
// answers every command of the batch.
type Engine struct {
	log     Log
	load    Loader
	clock   Clock
	cfg     Config
	metrics Metrics
	logger  zerolog.Logger

	in       chan *request
	stop     chan struct{}
	done     chan struct{}
	maxBatch int

	// mu guards state: the sequencer holds it for writing from the first
	// decision of a batch until the batch is committed (or reloaded), so
	// readers only ever see committed state.
	mu        sync.RWMutex
	state     *projections.State
	committed ledger.Head
	failed    error // set when the log cannot be written and reload failed

	manual *ManualClock // the test clock, when serving with --clock=manual

	committedHook func(head ledger.Head, events []*ledger.Event, bodies []any)

	closeMu sync.RWMutex // senders hold it for reading while they enqueue
	closed  bool
}

type request struct {
	cmd  Command
	res  Result
	err  error
	done chan struct{}
}

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
	// Committed, when set, is called by the sequencer after every commit
	// that appended events, with the new head, those events and their
	// bodies (bodies[i] is what projections.DecodeBody returns for
	// events[i]; the hook must not change them), while it still holds the
	// projections' write lock: it must return at once and must not call
	// Read (snapshots and metrics hand the work elsewhere).
	Committed func(head ledger.Head, events []*ledger.Event, bodies []any)
}

// NewEngine starts the sequencer over a loaded state.
func NewEngine(o Options) *Engine {
	if o.MaxBatch <= 0 {
		o.MaxBatch = 4096
	}
	e := &Engine{log: o.Log, load: o.Load, clock: o.Clock, cfg: o.Config, metrics: o.Metrics, logger: o.Logger,
		in: make(chan *request, o.MaxBatch), stop: make(chan struct{}), done: make(chan struct{}),
		maxBatch: o.MaxBatch, state: o.State, committed: o.State.Head, manual: o.Manual, committedHook: o.Committed}
	if o.Manual != nil {
		e.clock = o.Manual
	}
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
	r := &request{cmd: cmd, done: make(chan struct{})}
	e.closeMu.RLock()
	if e.closed {
		e.closeMu.RUnlock()
		return Result{}, ErrShuttingDown
	}
	select {
	case e.in <- r:
	case <-ctx.Done():
		e.closeMu.RUnlock()
		return Result{}, ctx.Err()
	}
	e.closeMu.RUnlock()
	// Once queued, the answer always comes: the batch commits or fails.
	<-r.done
	return r.res, r.err
}

// Read runs fn with the committed projections under a read lock.
func (e *Engine) Read(fn func(s *projections.State)) {
	e.mu.RLock()
	defer e.mu.RUnlock()
	fn(e.state)
}

// ReadNow runs fn with the committed projections and the server time a
// read at this moment sees.
func (e *Engine) ReadNow(fn func(s *projections.State, now int64)) {
	e.mu.RLock()
	defer e.mu.RUnlock()
	fn(e.state, e.nowLocked())
}

// Now returns the server time a read at this moment sees: the clock, never
// below the committed head, in ms.
func (e *Engine) Now() int64 {
	e.mu.RLock()
	defer e.mu.RUnlock()
	return e.nowLocked()
}

func (e *Engine) nowLocked() int64 {
	now := Ms(e.clock.Now())
	if now < e.state.Head.At {
		now = e.state.Head.At
	}
	return now
}

// Err reports why the engine stopped accepting commands, if it did.
func (e *Engine) Err() error {
	e.mu.RLock()
	defer e.mu.RUnlock()
	return e.failed
}

// Close stops accepting commands, finishes the batch in flight, and
// answers everything still queued with ErrShuttingDown.
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

func (e *Engine) run() {
	defer close(e.done)
	batch := make([]*request, 0, e.maxBatch)
	for {
		select {
		case r := <-e.in:
			batch = append(batch[:0], r)
		case <-e.stop:
			e.drainClosed()
			return
		}
	drain:
		for len(batch) < e.maxBatch {
			select {
			case r := <-e.in:
				batch = append(batch, r)
			default:
				break drain
			}
		}
		e.runBatch(batch)
		for i := range batch {
			batch[i] = nil
		}
	}
}

func (e *Engine) drainClosed() {
	for {
		select {
		case r := <-e.in:
			r.err = ErrShuttingDown
			close(r.done)
		default:
			return
		}
	}
}

// runBatch decides, commits and answers one batch.
func (e *Engine) runBatch(batch []*request) {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.failed != nil {
		for _, r := range batch {
			r.err = ErrUnavailable
			close(r.done)
		}
		return
	}
	s := e.state
	expected := e.committed
	head := expected
	var events []*ledger.Event
	var bodies []any     // each event's body, as the draft built it
	var encoded [][]byte // each event's stored bytes, from SealEncoded
	var soft []ledger.SoftRecord
	var manual *int64
	var secretCheck []byte
	poisoned := error(nil)
	for _, r := range batch {
		now := Ms(e.clock.Now())
		if manual != nil {
			now = *manual
		}
		if now < head.At {
			now = head.At
		}
		if poisoned != nil {
			r.err = ErrUnavailable
			continue
		}
		d, err := r.cmd.Decide(&Ctx{State: s, Now: now, Cfg: &e.cfg})
		if err != nil {
			r.err = err
			continue
		}
		for i := range d.Events {
			ev, err := e.stamp(s, &d.Events[i], now, head)
			var raw []byte
			if err == nil {
				head, raw, err = ledger.SealEncoded(ev, head)
			}
			if err == nil {
				err = s.ApplyDecoded(ev, d.Events[i].Body) // no need to decode what was just encoded
			}
			if err != nil {
				poisoned = fmt.Errorf("commands: applying a decided event: %w", err)
				r.err = ErrInternal
				break
			}
			events = append(events, ev)
			bodies = append(bodies, d.Events[i].Body)
			encoded = append(encoded, raw)
		}
		if r.err != nil {
			continue
		}
		soft = append(soft, d.Soft...)
		if d.Effect != nil {
			d.Effect(s)
		}
		if d.ManualClock != nil {
			manual = d.ManualClock
		}
		if d.SecretCheck != nil {
			secretCheck = d.SecretCheck
		}
		if d.Answer != nil {
			r.res = d.Answer(s)
		}
		r.res.Now = now
		r.res.Seq = head.Seq
	}

	var commitErr error
	if poisoned == nil && (len(events) > 0 || len(soft) > 0 || manual != nil) {
		b := &ledger.Batch{Expected: expected, Events: events, Encoded: encoded, Soft: soft, SecretCheck: secretCheck}
		if manual != nil {
			b.ManualClock = &ledger.ManualClock{Enabled: true, Now: *manual}
		}
		start := time.Now() //tl:wallclock commit-latency metric
		commitErr = e.log.Append(b)
		if commitErr == nil && e.metrics.BatchCommitted != nil {
			e.metrics.BatchCommitted(len(batch), len(events), time.Since(start))
		}
	}
	if poisoned != nil || commitErr != nil {
		cause := poisoned
		if cause == nil {
			cause = commitErr
		}
		e.logger.Error().Err(cause).Int("batch", len(batch)).Msg("batch failed; reloading projections from the log")
		for _, r := range batch {
			r.err, r.res = ErrUnavailable, Result{}
		}
		e.reload()
	} else {
		e.committed = head
		afterCommit(events)
		if e.committedHook != nil && len(events) > 0 {
			e.committedHook(head, events, bodies)
		}
		if manual != nil && e.manual != nil {
			e.manual.Set(time.UnixMilli(*manual))
		}
	}
	for _, r := range batch {
		if e.metrics.Command != nil {
			e.metrics.Command(r.cmd, r.res, r.err)
		}
		if e.metrics.Claimed != nil && r.err == nil && !r.res.Replayed && r.res.Record != nil &&
			r.res.Record.EventType == projections.EvTaskClaimed {
			e.metrics.Claimed()
		}
		close(r.done)
	}
}

// reload replaces the projections with a fresh load from the log on disk;
// when that fails the engine refuses every later command.
func (e *Engine) reload() {
	if e.load == nil {
		e.failed = errors.New("commands: no loader to recover projections")
		return
	}
	s, err := e.load()
	if err != nil {
		e.failed = fmt.Errorf("commands: reload after failed commit: %w", err)
		e.logger.Error().Err(err).Msg("reload failed; refusing commands")
		return
	}
	e.state = s
	e.committed = s.Head
}

// stamp turns a draft into an envelope (seq and hash are set by Seal).
func (e *Engine) stamp(s *projections.State, d *Draft, now int64, head ledger.Head) (*ledger.Event, error) {
	body, err := projections.EncodeBody(d.Body)
	if err != nil {
		return nil, err
	}
	return &ledger.Event{
		Stream: d.Stream, StreamVersion: s.StreamVersion(d.Stream) + 1,
		Type: d.Type, Schema: projections.CurrentSchema(d.Type), At: now,
		Actor: d.Actor, Idem: d.Idem, Body: body,
	}, nil
}
