package commands

import (
	"bytes"
	"errors"
	"fmt"

	"taskledger/events"
	"taskledger/ledger"
	"taskledger/projections"
)

// Following another sequencer.
//
// On a cluster one node sequences and appends; every other node's engine
// decides nothing and follows: Follow applies the events the sequencer
// committed (read back from the shared log) to the projections, exactly
// as this engine's committer publishes its own batches (head, the
// authentication index, the hooks), so reads, authentication, snapshots
// and metrics work the same on every node. Exclusive runs a function on
// the projections with nothing uncommitted in the pipeline (loading the
// soft records before a follower starts to sequence).

// ErrNotContinuing is returned by Follow for events that do not continue
// the engine's head (densely, chained by prev_hash).
var ErrNotContinuing = errors.New("commands: followed events do not continue the head")

type exclusive struct {
	fn   func() error
	err  error
	done chan struct{}
}

// Exclusive runs fn on the sequencer goroutine once no decided event is
// uncommitted, holding the projections' write lock. fn must not call the
// engine.
func (e *Engine) Exclusive(fn func(s *projections.State) error) error {
	x := &exclusive{done: make(chan struct{})}
	x.fn = func() error { return fn(e.state) }
	e.closeMu.RLock()
	if e.closed {
		e.closeMu.RUnlock()
		return ErrShuttingDown
	}
	e.exclusive <- x // run() takes it (it answers every one, even at shutdown)
	e.closeMu.RUnlock()
	<-x.done
	return x.err
}

// Follow applies events committed by another sequencer, in seq order, to
// the projections (the Leaves hook is not called: the Merkle tree of a
// transparency log is node-local and not kept by a follower). The first must continue the engine's head. Nothing the
// engine decided may be uncommitted meanwhile: Follow waits for that, so
// it is meant for a node whose engine is given no commands. On an event
// that does not apply the projections are reloaded (Loader) and the error
// returned.
func (e *Engine) Follow(evs []*ledger.Event) error {
	if len(evs) == 0 {
		return nil
	}
	return e.Exclusive(func(s *projections.State) error { return e.follow(s, evs) })
}

func (e *Engine) follow(s *projections.State, evs []*ledger.Event) error {
	bodies := make([]any, len(evs))
	head := e.head
	for i, ev := range evs {
		if ev.Seq != head.Seq+1 || !bytes.Equal(ev.PrevHash, head.Hash) {
			if i > 0 {
				e.reload()
			}
			return fmt.Errorf("%w: seq %d after head %d", ErrNotContinuing, ev.Seq, head.Seq)
		}
		b, err := events.DecodeBody(ev.Type, ev.Schema, ev.Body)
		if err == nil && ev.Schema == events.CurrentSchema(ev.Type) {
			err = s.ApplyDecoded(ev, b)
		} else if err == nil {
			err = s.Apply(ev) // an older schema: Apply upgrades it
		}
		if err != nil {
			e.reload()
			return fmt.Errorf("commands: follow seq %d: %w", ev.Seq, err)
		}
		bodies[i] = b
		head = ledger.Head{Seq: ev.Seq, Hash: ev.Hash, At: ev.At}
	}
	e.head = head
	e.auth.apply(evs, bodies)
	if e.committedHook != nil {
		e.committedHook(head, evs, bodies)
	}
	return nil
}

// Head is the head of the committed projections.
func (e *Engine) Head() ledger.Head {
	e.rlock()
	defer e.mu.RUnlock()
	return e.state.Head
}
