package node

import (
	"context"
	"errors"
	"time"

	"taskledger/commands"
	"taskledger/ledger"
)

// The follower's tail: while this node does not sequence, every event
// the sequencer appended is read back from the stream and applied to the
// node's projections through its engine (commands.Engine.Follow), woken
// by the subject's messages (a wake-up only) and by a poll.

// followChunk is how many events one Follow call applies.
const followChunk = 512

// followRetry is how soon a failed catch-up is tried again.
const followRetry = 20 * time.Millisecond

func (c *clusterLink) wake() {
	select {
	case c.kick <- struct{}{}:
	default:
	}
}

func (c *clusterLink) tailLoop() {
	defer c.wg.Done()
	appended, unsub, err := c.log.Appended()
	if err != nil {
		c.logger.Warn().Err(err).Msg("no wake-up on appends; the tail polls")
		appended = nil
	} else {
		defer unsub()
	}
	t := time.NewTicker(c.cc.Poll)
	defer t.Stop()
	for {
		select {
		case <-c.stop:
			return
		case <-appended:
		case <-c.kick:
		case <-t.C:
		}
		c.mu.Lock()
		r := c.role
		c.mu.Unlock()
		if r != following {
			continue
		}
		if err := c.followStream(); err != nil && !errors.Is(err, commands.ErrShuttingDown) {
			// Often a replica behind the stream's leader answered a read of
			// a message the leader already has: try again soon, not at
			// the next poll (reads wait for the follower).
			c.logger.Debug().Err(err).Msg("following the stream failed; retrying")
			time.AfterFunc(followRetry, c.wake)
		}
	}
}

// followStream is the tail's catch-up. It runs only while the node
// follows, as seen under catchMu: once the role changed (a promotion, a
// test forcing the node to sequence) and catchMu was taken and released,
// no catch-up of the tail is running or starts.
func (c *clusterLink) followStream() error {
	c.catchMu.Lock()
	defer c.catchMu.Unlock()
	c.mu.Lock()
	r := c.role
	c.mu.Unlock()
	if r != following {
		return nil
	}
	return c.catchUpLocked()
}

// catchUp applies every event after the projections' head, up to the
// stream's head as of now.
func (c *clusterLink) catchUp() error {
	c.catchMu.Lock()
	defer c.catchMu.Unlock()
	return c.catchUpLocked()
}

// catchUpLocked is catchUp with catchMu held.
func (c *clusterLink) catchUpLocked() error {
	var chunk []*ledger.Event
	err := c.log.Range(c.eng.Head().Seq, func(e *ledger.Event) error {
		e.Body = append([]byte(nil), e.Body...) // the projections keep nothing of the read buffer
		chunk = append(chunk, e)
		if len(chunk) < followChunk {
			return nil
		}
		err := c.eng.Follow(chunk)
		chunk = nil
		return err
	})
	if err == nil {
		err = c.eng.Follow(chunk)
	}
	return err
}

// readBarrier makes a follower's read see at least every event the
// stream held when the read arrived: it reads the stream's head and waits
// until the projections reach it (bounded by ReadWait). A sequencer
// within its lease reads its own committed projections: nobody else can
// have appended.
func (c *clusterLink) readBarrier(ctx context.Context) error {
	if c.sequencing() {
		return nil
	}
	h, err := c.log.Head()
	if err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(ctx, c.cc.ReadWait)
	defer cancel()
	for {
		wait := c.applied.Wait()
		if c.eng.Head().Seq >= h.Seq {
			return nil
		}
		c.wake()
		select {
		case <-wait:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}
