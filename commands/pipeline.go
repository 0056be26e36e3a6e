package commands

import (
	"errors"
	"fmt"
	"time"

	"taskledger/events"
	"taskledger/ledger"
	"taskledger/projections"
)

// The sequencer pipeline.
//
// The sequencer goroutine (run) decides commands one at a time against the
// projections, applying each decision at once so the next command sees it,
// and collects the decided events into the open batch. The committer
// goroutine writes one batch at a time (ledger Append: one transaction,
// one fsync), reports the outcome to the sequencer and hands the answers of
// a committed batch to its answering goroutine, so the next commit starts
// while they are delivered. While batch N commits, every
// command that arrives is decided into batch N+1; when N has committed,
// N+1 goes to the committer and the next command opens N+2. So at most two
// batches are uncommitted: the one in flight and the open one.
//
// Gathering: when N has committed, N+1 does not go at once. The callers N
// answered usually send their next command a moment later (a device's
// next step); handed off at once, N+1 would commit without them and they
// would wait for all of N+1's commit and then their own (two commit cycles
// per command, the fleet split in two halves that take turns). So N+1
// stays open until it also holds as many commands as N answered, or for
// N's commit duration (capped at GatherMax) after N's answers went out,
// whichever comes first; a command that arrives when nothing is in
// flight waits the same way for the callers of the newest commit, if that
// time has not passed. When that time is up while the callers are still
// arriving (the last one less than an eighth of it ago: a machine slowed
// down, the callers did not stop), it waits on while they keep coming,
// up to twice that time: cut there, the rest of them would each wait a
// whole commit more. It never waits while a reader is waiting, and a
// lone caller (N answered one command, and it is the one arriving) never
// waits at all. Waiting costs the batch's first commands at most two
// commits' duration; committing without the callers would cost each of
// them a whole commit.
//
// On a PipelinedLog (a JetStream stream) up to depth batches are in flight
// at once: the open batch goes to the committer as soon as fewer than
// depth are, the committer publishes it at once (its expected last
// sequence is the one the batch before it will get) and a goroutine
// beside it awaits the acknowledgements, in order. The rules below hold
// for every batch in flight: each is answered only after its own commit
// and the ones before it, and a failed batch fails every batch in flight
// after it (whatever the log answered for them) and the open one.
//
//   - A command is answered only after its batch committed, and batches
//     commit in order: an answer never depends on an uncommitted event
//     (a decision of N+1 that saw N's events, a replay of N's record, an
//     error N's events caused, are all answered after N and N+1 commit).
//   - A failed commit fails its batch and the open batch decided on top of
//     it: every command decided since the last good commit is answered
//     ErrUnavailable. When the log's file could not be written or synced
//     (ledger.ErrCommitIO) the engine is fenced: it answers every later
//     command ErrUnavailable and its projections are never read again
//     (the process restarts and loads the log from disk, see fence). Any
//     other failure (a refused sequence check, a cluster's fenced append)
//     wrote nothing: the projections are reloaded from the log before the
//     next decision.
//   - Readers see committed state only: the sequencer holds the write lock
//     whenever the projections hold an uncommitted event, and a waiting
//     reader makes it stop deciding until the pipeline is empty.

// job is one batch: its commands, the events they decided and what the
// transaction writes besides.
type job struct {
	reqs     []*request
	expected ledger.Head // the head the batch continues
	head     ledger.Head // after its last event
	events   []*ledger.Event
	bodies   []any    // each event's body, as its draft built it
	encoded  [][]byte // each event's stored bytes, from SealEncoded
	soft     []ledger.SoftRecord
	manual   *int64
	secret   []byte
	poisoned error         // a decided event did not apply: the batch fails
	batch    *ledger.Batch // what Append writes; nil when nothing
	captures []*captureReq // taken after this batch's last decision: answered when it settles
	gen      uint64        // Engine.gen when handed off: a failure fails every batch of its gen

	leafHashes [][]byte      // each event's Merkle leaf hash (Options.LeafHash), once hashed is closed
	hashed     chan struct{} // closed when leafHashes is filled; nil when nothing hashes them

	took                   time.Duration // its commit's duration (gather waits at most as long for the callers it answered)
	commitStart, committed time.Time     // for Metrics.Phases: when its commit began and ended
}

// pipe is the sequencer's view of the pipeline. open != nil implies
// inflight is not empty: a batch decided while nothing is in flight is
// handed to the committer at once.
type pipe struct {
	inflight []*job // with the committer, oldest first (at most depth)
	open     *job   // being decided, waits until fewer than depth are in flight
}

func (e *Engine) run() {
	defer close(e.done)
	var p pipe
	locked := false
	for {
		if len(p.inflight) == 0 {
			// Nothing uncommitted: readers may look.
			if locked {
				e.mu.Unlock()
				locked = false
			}
			select {
			case r := <-e.in:
				e.mu.Lock()
				locked = true
				p.open = &job{expected: e.head}
				e.decideQueued(p.open, r)
				e.gather(&p)
				e.handOff(&p)
			case c := <-e.captures:
				e.capture(&p, c)
			case x := <-e.exclusive:
				e.mu.Lock()
				x.err = x.fn()
				e.mu.Unlock()
				close(x.done)
			case <-e.stop:
				e.shutdown()
				return
			}
			continue
		}
		// A batch is in flight. Wait for it instead of deciding more when
		// a reader waits (the pipeline empties within two commits) or the
		// open batch is full or failed.
		if e.readers.Load() > 0 || (p.open != nil && (p.open.poisoned != nil || len(p.open.reqs) >= e.maxBatch)) {
			e.settle(&p, <-e.results)
			continue
		}
		select { // a finished commit first: it lets the open batch go
		case err := <-e.results:
			e.settle(&p, err)
			continue
		default:
		}
		select {
		case err := <-e.results:
			e.settle(&p, err)
		case r := <-e.in:
			if p.open == nil {
				p.open = &job{expected: e.head}
			}
			e.decideQueued(p.open, r)
			if len(p.inflight) < e.depth { // pipelined: publish it now
				e.handOff(&p)
			}
		case c := <-e.captures:
			e.capture(&p, c)
		case <-e.stop:
			for len(p.inflight) > 0 { // what was decided commits (or fails) and is answered
				e.settle(&p, <-e.results)
			}
			if locked {
				e.mu.Unlock()
			}
			e.shutdown()
			return
		}
	}
}

// shutdown answers everything still queued and stops the committer.
func (e *Engine) shutdown() {
	for {
		select {
		case r := <-e.in:
			r.err = ErrShuttingDown
			r.done <- struct{}{}
		default:
			close(e.commits)
			<-e.committed
			e.hashers.Wait() // a failed batch's leaves, never waited for by grow
			return
		}
	}
}

// settle takes the outcome of the oldest batch in flight. Committed: the
// open batch goes to the committer. Failed: the batches in flight after
// it and the open batch, decided on top of it, fail too (the committer
// fails the ones in flight whatever the log answers; their outcomes are
// taken here) and the projections are reloaded.
func (e *Engine) settle(p *pipe, err error) {
	j := p.inflight[0]
	p.inflight = p.inflight[1:]
	if err != nil {
		failed := append([]*job{j}, p.inflight...)
		for range p.inflight {
			<-e.results
		}
		failed = append(failed, p.open)
		p.inflight, p.open = nil, nil
		e.gatherTo = 0
		e.gen++ // what is handed off from now on is decided on the reloaded state
		e.fail(err, failed...)
		return
	}
	if e.pendingJob == j { // the test clock now reads what that batch set
		e.pendingManual, e.pendingJob = nil, nil
	}
	j.releaseCaptures(nil)
	e.planGather(p, j)
	if p.open != nil {
		e.gather(p)
	}
	e.handOff(p)
}

// planGather sets up, after j committed, the next batch's wait for the
// callers j answered: until it holds as many commands more than the open
// batch holds now, for at most j's commit duration, capped at gatherMax.
func (e *Engine) planGather(p *pipe, j *job) {
	e.gatherTo = 0
	if e.depth != 1 || e.gatherMax <= 0 || len(j.reqs) == 0 {
		return
	}
	e.gatherTo = len(j.reqs)
	if p.open != nil {
		e.gatherTo += len(p.open.reqs)
	}
	wait := min(j.took, e.gatherMax)
	now := time.Now() //tl:wallclock how long a batch waits for callers, not a decision
	e.gatherUntil, e.gatherCap, e.gatherLull = now.Add(wait), now.Add(2*wait), max(wait/8, minGatherLull)
}

// minGatherLull is the shortest pause in arrivals that ends a gather run
// past its time: callers a few microseconds apart are still coming.
const minGatherLull = 200 * time.Microsecond

// gather keeps the open batch open, nothing being in flight, until it
// holds e.gatherTo commands or e.gatherUntil has passed (see "Gathering"
// above); it stops early when the batch is full or failed, or a reader
// waits. It waits once per commit.
func (e *Engine) gather(p *pipe) {
	j := p.open
	target := min(e.gatherTo, e.maxBatch)
	e.gatherTo = 0
	wait := time.Until(e.gatherUntil)
	if len(j.reqs) >= target || wait <= 0 || e.readers.Load() > 0 {
		return
	}
	t := time.NewTimer(wait)
	defer t.Stop()
	var last time.Time // the last caller's arrival
	for len(j.reqs) < target && j.poisoned == nil && e.readers.Load() == 0 {
		select {
		case r := <-e.in:
			e.decideQueued(j, r)
			last = time.Now() //tl:wallclock how long a batch waits for callers, not a decision
		case <-e.readerWaits: // the loop's condition tells a waiting reader from an old signal
		case <-t.C:
			// Callers still arriving: wait on until one lull passes
			// without any, or the cap.
			now := time.Now() //tl:wallclock how long a batch waits for callers, not a decision
			if last.IsZero() || now.Sub(last) >= e.gatherLull || !now.Before(e.gatherCap) {
				return
			}
			t.Reset(min(e.gatherLull-now.Sub(last), e.gatherCap.Sub(now)))
		}
	}
}

// handOff sends the open batch to the committer (fewer than depth are in
// flight).
func (e *Engine) handOff(p *pipe) {
	j := p.open
	if j == nil {
		return
	}
	if j.poisoned != nil {
		if len(p.inflight) > 0 {
			// It fails once the batches before it settled: the reload
			// that follows must not drop their events from the projections.
			return
		}
		p.open = nil
		e.fail(j.poisoned, j)
		return
	}
	p.open = nil
	j.head = e.head // the open batch holds the newest decided events
	if len(j.events) > 0 || len(j.soft) > 0 || j.manual != nil {
		j.batch = &ledger.Batch{Expected: j.expected, Events: j.events, Encoded: j.encoded, Soft: j.soft, SecretCheck: j.secret}
		if e.readModel && len(j.events) > 0 { // the tasks the batch's newest event settles go to disk with it
			rm, err := e.state.TakeReadModel()
			if err != nil {
				e.fail(err, j)
				return
			}
			j.batch.ReadModel = rm
		}
		if j.manual != nil {
			j.batch.ManualClock = &ledger.ManualClock{Enabled: true, Now: *j.manual}
		}
	}
	j.gen = e.gen
	p.inflight = append(p.inflight, j)
	e.hashLeaves(j) // started first: the committer, readied last, runs next
	e.commits <- j  // the committer takes it at once: fewer than depth are in flight
}

// hashLeaves hashes j's leaves (Options.LeafHash) on a goroutine of its
// own while j commits: its answers then wait only for the tree to take
// them (grow), not for the hashing as well. The bytes never change once
// sealed; a batch that fails is never grown, and shutdown waits for its
// goroutine.
func (e *Engine) hashLeaves(j *job) {
	if e.leavesHook == nil || e.leafHash == nil || len(j.encoded) == 0 {
		return
	}
	j.hashed = make(chan struct{})
	e.hashers.Add(1)
	go func(raws [][]byte) {
		defer e.hashers.Done()
		hashes := make([][]byte, len(raws))
		for i, raw := range raws {
			hashes[i] = e.leafHash(raw)
		}
		j.leafHashes = hashes
		close(j.hashed)
	}(j.encoded)
}

// decideQueued decides r and then every command already queued, up to a
// full batch, into j.
func (e *Engine) decideQueued(j *job, r *request) {
	e.decide(j, r)
	for len(j.reqs) < e.maxBatch && j.poisoned == nil {
		select {
		case r := <-e.in:
			e.decide(j, r)
		default:
			return
		}
	}
}

// decide decides one command into j: its events are stamped, chained onto
// the newest decided head and applied to the projections at once.
func (e *Engine) decide(j *job, r *request) {
	if r.timed {
		r.t.decideStart = time.Now()                //tl:wallclock phase metric
		defer func() { r.t.decided = time.Now() }() //tl:wallclock phase metric
	}
	j.reqs = append(j.reqs, r)
	e.sequenced.Add(1)
	if e.failed.Load() != nil || j.poisoned != nil {
		r.err = ErrUnavailable
		return
	}
	s := e.state
	var now int64
	if e.pendingManual != nil {
		now = max(*e.pendingManual, e.head.At)
	} else {
		now = e.timeAt(e.head.At)
	}
	d, err := r.cmd.Decide(&Ctx{State: s, Now: now, Cfg: &e.cfg})
	if err != nil {
		r.err = err
		return
	}
	for i := range d.Events {
		ev := e.stamp(s, &d.Events[i], now)
		var raw []byte
		e.head, raw, err = ledger.SealBody(ev, e.head, d.Events[i].Body, events.AppendBody)
		if err == nil {
			err = s.ApplyDecoded(ev, d.Events[i].Body) // no need to decode what was just encoded
		}
		if err != nil {
			j.poisoned = fmt.Errorf("commands: applying a decided event: %w", err)
			r.err = ErrInternal
			return
		}
		j.events = append(j.events, ev)
		j.bodies = append(j.bodies, d.Events[i].Body)
		j.encoded = append(j.encoded, raw)
	}
	j.soft = append(j.soft, d.Soft...)
	if d.Effect != nil {
		d.Effect(s)
	}
	if d.ManualClock != nil {
		j.manual = d.ManualClock
		e.pendingManual, e.pendingJob = d.ManualClock, j
	}
	if d.SecretCheck != nil {
		j.secret = d.SecretCheck
	}
	if d.Answer != nil {
		r.res = d.Answer(s)
	}
	r.res.Now = now
	r.res.Seq = e.head.Seq
}

// fail answers every command of the given batches ErrUnavailable after
// reloading the projections from the log on disk, or, when the log's file
// could not be written or synced, after fencing the engine.
func (e *Engine) fail(cause error, jobs ...*job) {
	n := 0
	for _, j := range jobs {
		if j != nil {
			n += len(j.reqs)
		}
	}
	if errors.Is(cause, ledger.ErrCommitIO) {
		e.logger.Error().Err(cause).Int("commands", n).
			Msg("the log's commit failed: fenced, answering 503 to everything until the process restarts and reads the log from disk")
		e.fence(cause)
	} else {
		e.logger.Error().Err(cause).Int("commands", n).Msg("batch failed; reloading projections from the log")
	}
	// The failed commands are answered before the reload: a cluster node's
	// reload waits out an outage of NATS (node.retrying), and their clients
	// must get their 503 now, not when a quorum is back (D391). Nothing is
	// decided before the reload ends: this goroutine decides.
	for _, j := range jobs {
		if j == nil {
			continue
		}
		j.releaseCaptures(ErrUnavailable)
		for _, r := range j.reqs {
			r.err, r.res = ErrUnavailable, Result{}
			e.answer(r)
		}
	}
	if errors.Is(cause, ledger.ErrCommitIO) {
		return
	}
	// So are the commands queued behind them, not decided yet: they were
	// to be decided on the projections being replaced, and a cluster node
	// that failed a batch no longer sequences (its fence would refuse them
	// after the reload).
	for queued := true; queued; {
		select {
		case r := <-e.in:
			r.err, r.res = ErrUnavailable, Result{}
			e.answer(r)
		default:
			queued = false
		}
	}
	e.reload()
}

// fence stops the engine from acknowledging anything after a failed write
// or sync of the log (fail-stop). The projections are not reloaded: the
// file read back through the page cache may still hold the failed batch,
// which a later fsync error or a restart may lose, so a replay answered
// from it would acknowledge what may never be durable. Every later command
// is answered ErrUnavailable, reads of the projections are refused by the
// api (Err), and Fenced is closed so that the server exits and is
// restarted: only a fresh open of the file tells what it holds.
func (e *Engine) fence(cause error) {
	e.pendingManual, e.pendingJob = nil, nil
	e.failed.Store(&failure{err: fmt.Errorf("%w: %w", ErrFenced, cause)})
	e.fenceOnce.Do(func() { close(e.fenced) })
}

// reload replaces the projections with a fresh load from the log on disk;
// when that fails the engine refuses every later command.
func (e *Engine) reload() {
	e.pendingManual, e.pendingJob = nil, nil
	if e.load == nil {
		e.failed.Store(&failure{err: errors.New("commands: no loader to recover projections")})
		return
	}
	s, err := e.load()
	if err != nil {
		e.failed.Store(&failure{err: fmt.Errorf("commands: reload after failed commit: %w", err)})
		e.logger.Error().Err(err).Msg("reload failed; refusing commands")
		return
	}
	keepCommittedPresence(e.state, s)
	s.CheckClaimsAgainst(e.state.ClaimsCheckedAgainst())
	e.state = s
	e.head = s.Head
}

// committer writes the batches the sequencer hands it, in order, and
// answers the commands of each one that committed. On a PipelinedLog it
// only starts each batch's append and a goroutine beside it awaits them,
// in order, so the next batch is published while the previous one's
// acknowledgement is in flight.
func (e *Engine) committer() {
	answers := make(chan *job, 1)
	answered := make(chan struct{})
	go func() { // answers a committed batch while the next one commits
		defer close(answered)
		for j := range answers {
			e.grow(j)
			for _, r := range j.reqs {
				e.answer(r)
			}
		}
	}()
	defer func() {
		close(answers)
		<-answered
		close(e.committed)
	}()
	var o outcomes
	plog, pipelined := e.log.(PipelinedLog)
	if !pipelined || e.depth < 2 {
		for j := range e.commits {
			var err error
			start := time.Now() //tl:wallclock commit-latency metric
			if j.batch != nil {
				err = e.log.Append(j.batch)
			}
			e.settled(&o, j, err, start, answers)
		}
		return
	}
	type started struct {
		j     *job
		wait  func() error
		start time.Time
	}
	acks := make(chan started, e.depth)
	acked := make(chan struct{})
	go func() {
		defer close(acked)
		for s := range acks {
			var err error
			if s.wait != nil {
				err = s.wait()
			}
			e.settled(&o, s.j, err, s.start, answers)
		}
	}()
	for j := range e.commits {
		s := started{j: j, start: time.Now()} //tl:wallclock commit-latency metric
		if j.batch != nil {
			s.wait = plog.Start(j.batch)
		}
		acks <- s
	}
	close(acks)
	<-acked
}

// outcomes is what the committer remembers of the batches it settled: a
// failed batch's gen, whose later batches fail too.
type outcomes struct {
	failed    bool
	failedGen uint64
}

// errEarlierFailed fails a batch decided on top of one that failed.
var errEarlierFailed = errors.New("commands: a batch before this one failed")

// settled reports the outcome of j, the oldest batch in flight, to the
// sequencer and, when it committed, publishes it and hands its answers on.
// A batch handed off before the sequencer took an earlier failure (the
// same gen) fails too, whatever the log answered.
func (e *Engine) settled(o *outcomes, j *job, err error, start time.Time, answers chan<- *job) {
	if err == nil && o.failed && j.gen == o.failedGen {
		err = errEarlierFailed
	}
	j.took = time.Since(start)
	if j.batch != nil {
		if err == nil && e.metrics.BatchCommitted != nil {
			e.metrics.BatchCommitted(len(j.reqs), len(j.events), j.took)
		}
		if err != nil && !errors.Is(err, errEarlierFailed) && e.metrics.CommitFailed != nil {
			e.metrics.CommitFailed(err)
		}
	}
	if err != nil {
		o.failed, o.failedGen = true, j.gen
	} else {
		if e.metrics.Phases != nil {
			j.commitStart, j.committed = start, start.Add(j.took)
		}
		e.publish(j)
	}
	e.results <- err
	if err == nil {
		answers <- j
	}
}

// publish runs what follows a commit before the sequencer learns of it:
// failpoints, the authentication index, the committed hook, the test
// clock. The committer then reports the outcome, hands the batch to its
// answering goroutine (grow, then the answers) and takes the next batch
// at once.
func (e *Engine) publish(j *job) {
	afterCommit(j.events)
	e.auth.apply(j.events, j.bodies)
	if e.committedHook != nil && len(j.events) > 0 {
		e.committedHook(j.head, j.events, j.bodies)
	}
	if j.manual != nil && e.manual != nil {
		e.manual.Set(time.UnixMilli(*j.manual))
	}
}

// grow runs on the answering goroutine, before any command of the batch
// is answered: the Merkle tree over the log takes the batch's leaves
// (Options.Leaves). Hashing them there, not between two commits, lets the
// next batch's commit start as soon as this one's did (D467); the tree
// may therefore trail the committed projections for a moment, never an
// answer.
func (e *Engine) grow(j *job) {
	if e.leavesHook != nil && len(j.events) > 0 {
		if j.hashed != nil {
			<-j.hashed
		}
		e.leavesHook(j.events[0].Seq, j.encoded, j.leafHashes)
	}
	if !j.committed.IsZero() {
		published := time.Now() //tl:wallclock phase metric
		for _, r := range j.reqs {
			if r.timed {
				r.t.commitStart, r.t.committed, r.t.published = j.commitStart, j.committed, published
			}
		}
	}
}

// answer releases one command's answer.
func (e *Engine) answer(r *request) {
	if e.metrics.Command != nil {
		e.metrics.Command(r.cmd, r.res, r.err)
	}
	if e.metrics.Claimed != nil && r.err == nil && !r.res.Replayed && r.res.Record != nil &&
		r.res.Record.EventType == string(events.EvTaskClaimed) {
		e.metrics.Claimed()
	}
	if r.timed {
		r.t.answered = time.Now() //tl:wallclock phase metric
	}
	r.done <- struct{}{} // the last touch: Do reuses r
}

// stamp turns a draft into an envelope; SealBody encodes the body into it
// and sets seq and hash.
func (e *Engine) stamp(s *projections.State, d *Draft, now int64) *ledger.Event {
	return &ledger.Event{
		Stream: d.Stream, StreamVersion: s.StreamVersion(d.Stream) + 1,
		Type: d.Type, Schema: events.CurrentSchema(d.Type), At: now,
		Actor: d.Actor, Idem: d.Idem,
	}
}
