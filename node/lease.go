package node

import (
	"encoding/json"
	"errors"
	"sync"
	"sync/atomic"
	"time"

	"taskledger/commands"
	"taskledger/ledger"
	"taskledger/ledger/jetstream"
	"taskledger/projections"
)

// The sequencer lease, as a node runs it.
//
// Every quarter of the TTL the lease loop acts on the role:
//   - sequencing: renew at the revision held (compare-and-set). Success
//     moves the local deadline to three quarters of the TTL after the
//     renewal began (the server keeps the key a whole TTL after it stored
//     it, later than that); a lost lease steps down at once; an error
//     leaves the deadline where it is, so a node that cannot reach the
//     cluster stops appending before anyone else can take the lease.
//   - following: read the lease. A holder is the sequencer to forward to;
//     no holder: try to take it (create-if-absent), then promote: catch up
//     with the stream and start sequencing. A lease that names this very
//     process (it stepped down after a refused append while its lease
//     lived) is taken back the same way.
//
// A promotion runs inside a tick of the lease loop and can take longer
// than a TTL (catching up with a long tail, loading the soft records under
// load), so while it runs a goroutine of its own renews the lease every
// quarter of the TTL, as the loop would for a sequencer (D452). Each
// promotion has a term (c.term, one more per promotion): a renewal carries
// its new revision and deadline into the role only when it renewed the
// revision held in the term it was made for, so a promotion that ends
// sequences at the revision its last renewal wrote. A lost lease during
// the promotion steps down, and the promotion then ends as a follower: it
// sequences only when it is still promoting in its own term.
//
// Appends are fenced by the stream, not by the lease: the lease only keeps
// two nodes from fighting, so a node that wrongly believes it holds it can
// cost 503s, never a doubled or lost command.

func (c *clusterLink) leaseLoop() {
	defer c.wg.Done()
	t := time.NewTicker(c.cc.LeaseTTL / 4)
	defer t.Stop()
	c.leaseTick()
	for {
		select {
		case <-c.stop:
			return
		case <-t.C:
			c.leaseTick()
		}
	}
}

func (c *clusterLink) leaseTick() {
	c.tickMu.Lock()
	defer c.tickMu.Unlock()
	if c.paused.Load() {
		return
	}
	c.mu.Lock()
	r, rev, term := c.role, c.rev, c.term
	c.mu.Unlock()
	switch r {
	case sequencing:
		c.renew(rev, term)
	case following:
		c.lookForLease()
	}
}

// renew renews the lease held at rev by the promotion of term (the role
// sequencing or promoting). Its new revision and deadline are taken only
// while that promotion still holds rev: a node that stepped down since, or
// promoted again, keeps what it has.
func (c *clusterLink) renew(rev, term uint64) {
	began := c.clock.Now()
	next, err := c.lease.Renew(c.selfJSON, rev)
	switch {
	case err == nil:
		c.mu.Lock()
		c.contact = began
		if (c.role == sequencing || c.role == promoting) && c.term == term && c.rev == rev {
			c.rev, c.deadline = next, began.Add(c.cc.LeaseTTL*3/4)
		}
		c.mu.Unlock()
	case errors.Is(err, jetstream.ErrLeaseLost):
		c.stepDown("the sequencer lease was lost")
	default:
		c.logger.Warn().Err(err).Msg("renewing the sequencer lease failed; retrying")
	}
}

func (c *clusterLink) lookForLease() {
	asked := c.clock.Now()
	raw, rev, err := c.lease.Current()
	if err == nil || errors.Is(err, jetstream.ErrNoLease) {
		c.mu.Lock()
		c.contact = asked
		c.mu.Unlock()
	}
	if err == nil {
		var v leaseValue
		if json.Unmarshal(raw, &v) != nil {
			c.logger.Error().Msg("the sequencer lease holds no holder this build reads")
			return
		}
		if v.ID == c.self.ID {
			c.promote(rev, c.clock.Now()) // ours still: catch up and go on
			return
		}
		c.mu.Lock()
		changed := c.leader != v
		c.leader = v
		if changed || rev != c.leaderRev {
			c.leaderRev, c.revSeen = rev, asked
		}
		c.mu.Unlock()
		if changed {
			c.logger.Info().Str("sequencer", v.URL).Msg("following the sequencer")
		}
		return
	}
	if !errors.Is(err, jetstream.ErrNoLease) {
		c.logger.Warn().Err(err).Msg("reading the sequencer lease failed")
		return
	}
	c.mu.Lock()
	c.leader = leaseValue{}
	c.mu.Unlock()
	began := c.clock.Now()
	rev, err = c.lease.Acquire(c.selfJSON)
	if err != nil {
		if !errors.Is(err, jetstream.ErrLeaseHeld) {
			c.logger.Warn().Err(err).Msg("taking the sequencer lease failed")
		}
		return
	}
	c.promote(rev, began)
}

// promoteHook, when set (by the tests only), is called by every promotion
// after its catch-up with the node's advertised URL: a test makes a
// promotion slow with it.
var promoteHook atomic.Pointer[func(advertised string)]

// promote makes the holder of the lease at rev the sequencer: the tail
// stops, the projections catch up with the stream's head and take the
// soft records written since the node started, then the engine appends.
// The lease is renewed meanwhile (renewWhilePromoting). A promotion that
// cannot catch up, or lost the lease on the way (it stepped down), ends
// as a follower.
func (c *clusterLink) promote(rev uint64, began time.Time) {
	c.mu.Lock()
	c.role, c.rev, c.deadline = promoting, rev, began.Add(c.cc.LeaseTTL*3/4)
	c.term++
	term := c.term
	c.mu.Unlock()
	stopRenewing := c.renewWhilePromoting(term)
	err := c.catchUp()
	if h := promoteHook.Load(); h != nil {
		(*h)(c.self.URL)
	}
	if err == nil {
		err = c.eng.Exclusive(func(s *projections.State) error { return s.LoadSoft(c.log) })
	}
	if m := c.eng.Manual(); err == nil && m != nil {
		// The test clock goes on from the previous sequencer's value.
		var mc ledger.ManualClock
		if mc, err = c.log.ManualClock(); err == nil && mc.Enabled {
			m.Set(time.UnixMilli(max(mc.Now, c.eng.Head().At, commands.Ms(m.Now()))))
		}
	}
	stopRenewing() // no renewal in flight from here: the lease loop renews next
	c.mu.Lock()
	defer c.mu.Unlock()
	// Renewals moved c.rev on purpose; what ends this promotion is a step
	// down (the role) or a later promotion (the term).
	if err != nil || c.role != promoting || c.term != term {
		if err != nil {
			c.logger.Error().Err(err).Msg("catching up before sequencing failed; following")
		}
		if c.role == promoting && c.term == term {
			c.role = following
		}
		return
	}
	c.role = sequencing
	c.leader = c.self
	c.logger.Info().Uint64("head", c.eng.Head().Seq).Msg("sequencing: this node holds the lease")
	c.kickBlobGC()
}

// renewWhilePromoting renews the lease every quarter of the TTL while the
// promotion of term runs (its tick holds the lease loop), until the
// returned func, which waits for a renewal in flight; it gives up once
// the promotion is over (stepped down) and, like the lease loop, does
// nothing while paused or after the node stops.
func (c *clusterLink) renewWhilePromoting(term uint64) (stop func()) {
	done := make(chan struct{})
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		t := time.NewTicker(c.cc.LeaseTTL / 4)
		defer t.Stop()
		for {
			select {
			case <-done:
				return
			case <-c.stop:
				return
			case <-t.C:
			}
			if c.paused.Load() {
				continue
			}
			c.mu.Lock()
			r, rev, now := c.role, c.rev, c.term
			c.mu.Unlock()
			if r != promoting || now != term {
				return
			}
			c.renew(rev, term)
		}
	}()
	return func() {
		close(done)
		wg.Wait()
	}
}

// stepDown makes a sequencing (or promoting) node a follower: its engine
// appends nothing more (the fence refuses), and the tail catches it up
// with the stream.
func (c *clusterLink) stepDown(why string) {
	c.mu.Lock()
	was := c.role
	c.role = following
	c.leader = leaseValue{}
	c.mu.Unlock()
	if was != following {
		c.logger.Warn().Str("reason", why).Msg("stepping down: following the stream")
	}
	c.wake()
}
