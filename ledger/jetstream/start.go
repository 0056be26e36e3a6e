package jetstream

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"time"

	"github.com/nats-io/nats.go"

	"taskledger/ledger"
)

// Backoff between start attempts: doubling from the first to the most.
// While a start retries, each request is bounded by startRequest (or the
// configured Timeout when shorter): a request to a stream that has no
// leader yet gets no answer, and waiting for the next attempt is faster
// than waiting out the whole Timeout.
const (
	firstRetry   = 100 * time.Millisecond
	mostRetry    = 2 * time.Second
	startRequest = time.Second
)

// permanent reports whether a start failure will not go away by waiting:
// a resource of another configuration, a missing one a read-only open
// asked for, damage, refused credentials. Everything else (no server up,
// no responders, no leader yet, a deadline) is transient.
func permanent(err error) bool {
	for _, p := range []error{ErrConfigConflict, ErrStreamConfig, ErrMissing, ErrMessage, ErrBatchTooLarge,
		ledger.ErrCorrupt, ledger.ErrClosed, fs.ErrNotExist, fs.ErrPermission,
		nats.ErrAuthorization, nats.ErrAuthExpired, nats.ErrAuthRevoked, nats.ErrPermissionViolation} {
		if errors.Is(err, p) {
			return true
		}
	}
	return false
}

// retry runs attempt until it succeeds or fails for good; without a start
// deadline it runs once. Before each retry it logs what it waits for.
func (l *Log) retry(what string, attempt func() error) error {
	if l.startBy.IsZero() {
		return attempt()
	}
	ctx, cancel := context.WithDeadline(context.Background(), l.startBy)
	defer cancel()
	l.startReq.Store(int64(startRequest))
	defer l.startReq.Store(0)
	wait := firstRetry
	for n := 1; ; n++ {
		err := attempt()
		if err == nil || permanent(err) {
			return err
		}
		if ctx.Err() != nil {
			return fmt.Errorf("%w (%v): %s: %w", ErrStartTimeout, l.cfg.StartTimeout, what, err)
		}
		if l.cfg.Logf != nil {
			l.cfg.Logf("waiting for %s (attempt %d failed, next in %v): %v", what, n, wait, err)
		}
		t := time.NewTimer(wait)
		select {
		case <-ctx.Done():
		case <-t.C:
		}
		t.Stop()
		if wait *= 2; wait > mostRetry {
			wait = mostRetry
		}
	}
}
