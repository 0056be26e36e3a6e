package node

import (
	"encoding/json"
	"errors"
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
//     no holder: try to take it (create-if-absent), then catch up with the
//     stream and start sequencing. A lease that names this very process
//     (it stepped down after a refused append while its lease lived) is
//     taken back the same way.
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
	r, rev := c.role, c.rev
	c.mu.Unlock()
	switch r {
	case sequencing:
		c.renew(rev)
	case following:
		c.lookForLease()
	}
}

func (c *clusterLink) renew(rev uint64) {
	began := c.clock.Now()
	next, err := c.lease.Renew(c.selfJSON, rev)
	switch {
	case err == nil:
		c.mu.Lock()
		c.contact = began
		if c.role == sequencing && c.rev == rev {
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

// promote makes the holder of the lease at rev the sequencer: the tail
// stops, the projections catch up with the stream's head and take the
// soft records written since the node started, then the engine appends.
// A promotion that cannot catch up steps down again.
func (c *clusterLink) promote(rev uint64, began time.Time) {
	c.mu.Lock()
	c.role, c.rev, c.deadline = promoting, rev, began.Add(c.cc.LeaseTTL*3/4)
	c.term++
	c.mu.Unlock()
	err := c.catchUp()
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
	c.mu.Lock()
	defer c.mu.Unlock()
	if err != nil || c.role != promoting || c.rev != rev {
		if err != nil {
			c.logger.Error().Err(err).Msg("catching up before sequencing failed; following")
		}
		if c.role == promoting {
			c.role = following
		}
		return
	}
	c.role = sequencing
	c.leader = c.self
	c.logger.Info().Uint64("head", c.eng.Head().Seq).Msg("sequencing: this node holds the lease")
	c.kickBlobGC()
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
