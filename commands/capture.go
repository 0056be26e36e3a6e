package commands

import "taskledger/projections"

// captureReq is one CaptureDecided call waiting for its events to commit.
type captureReq struct {
	fn   func(s *projections.State)
	done chan error // capacity 1
}

// CaptureDecided runs fn on the sequencer's projections between two
// decisions — every decided event applied, committed or not — and returns
// once every one of those events has committed (nil), or ErrUnavailable
// when a batch holding one of them failed: what fn copied then holds
// events the log does not, and must be dropped. fn must only copy (it
// runs on the sequencer goroutine, which decides nothing meanwhile), and
// nothing it copied may be used before CaptureDecided returned nil.
//
// Unlike Read it never makes the sequencer wait for the pipeline to
// empty: a snapshot's capture costs the sequencer the copy only, and
// commits go on during it. Once the engine has stopped, fn runs on the
// final, committed projections.
func (e *Engine) CaptureDecided(fn func(s *projections.State)) error {
	c := &captureReq{fn: fn, done: make(chan error, 1)}
	select {
	case e.captures <- c:
	case <-e.done:
		if e.failed.Load() != nil { // fenced: the projections may hold a failed batch
			return ErrUnavailable
		}
		e.Read(fn) // nothing is uncommitted once the sequencer stopped
		return nil
	}
	return <-c.done // answered by the sequencer before it stops
}

// capture runs c on the projections and makes it wait for the batch that
// holds the newest decided event (p.open, else the newest batch in
// flight), or answers it
// at once when nothing is uncommitted.
func (e *Engine) capture(p *pipe, c *captureReq) {
	if e.failed.Load() != nil {
		c.done <- ErrUnavailable
		return
	}
	c.fn(e.state)
	switch {
	case p.open != nil:
		p.open.captures = append(p.open.captures, c)
	case len(p.inflight) > 0:
		last := p.inflight[len(p.inflight)-1]
		last.captures = append(last.captures, c)
	default:
		c.done <- nil
	}
}

// releaseCaptures answers the captures waiting for j: nil once j
// committed, err when it failed.
func (j *job) releaseCaptures(err error) {
	for _, c := range j.captures {
		c.done <- err
	}
	j.captures = nil
}
