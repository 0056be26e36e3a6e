package jetstream

import (
	"context"
	"errors"
	"time"

	"github.com/nats-io/nats.go"
	natsjs "github.com/nats-io/nats.go/jetstream"
)

// attemptBound bounds one attempt of a request that again repeats. A
// request that reaches a server while its resource has no leader (the
// leader's server stopped and handed over, or is gone) is dropped without
// an answer, and so is one in flight on a connection whose server goes
// away: waiting out the whole Timeout for it (5 s by default) held the
// sequencer's appends and lease for that long after one NATS server was
// lost, while the new leader answered within a few hundred milliseconds.
// Asking again every attemptBound gets the new leader's answer instead
// (D390).
const attemptBound = 500 * time.Millisecond

// againPause is the wait before asking again after an immediate refusal
// (no responders: nobody serves the resource yet).
const againPause = 50 * time.Millisecond

// again runs op with a context bounded by attemptBound, again while it
// fails for want of an answer (a timeout, no responders, a 503 of the
// JetStream API), until the request's whole bound (Timeout, or the start
// request bound while a start retries) has passed. op must be safe to
// repeat: a read, a put of the same value, or a write fenced by a
// compare-and-set whose caller resolves a refusal after a lost answer
// (publish's expected last sequence, the lease's revision).
func (l *Log) again(op func(ctx context.Context) error) error {
	whole, cancel := l.ctx()
	defer cancel()
	for {
		ctx, done := context.WithTimeout(whole, attemptBound)
		err := op(ctx)
		quick := ctx.Err() == nil // refused at once (no responders), not timed out
		done()
		if err == nil || !unanswered(err) || whole.Err() != nil {
			return err
		}
		if quick {
			t := time.NewTimer(againPause)
			select {
			case <-whole.Done():
			case <-t.C:
			}
			t.Stop()
		}
	}
}

// unanswered reports whether err means no server answered a request (as
// opposed to an answer that refuses it).
func unanswered(err error) bool {
	var apiErr *natsjs.APIError
	return errors.Is(err, context.DeadlineExceeded) || errors.Is(err, nats.ErrTimeout) ||
		errors.Is(err, nats.ErrNoResponders) || errors.Is(err, natsjs.ErrNoStreamResponse) ||
		(errors.As(err, &apiErr) && apiErr.Code == 503) // the JetStream API's "temporarily unavailable"
}
