package node

import (
	"context"
	"errors"
	"sync"
	"time"

	"github.com/rs/zerolog"

	"taskledger/commands"
)

// DefaultSoftCollectEvery is how often a running node collects expired
// soft idempotency records when Config.SoftCollectEvery is zero.
const DefaultSoftCollectEvery = time.Minute

// softCollector deletes expired soft idempotency records in the
// background: at start (records loaded from disk may have expired while
// the server was down) and then every `every` of wall time. Expiry itself
// is judged by the sequencer at the command's time (the injected clock),
// the ticker only decides when to look. Each round submits CollectSoft
// commands (at most commands.DefaultCollectLimit deletes each, one batch
// and one fsync each) until one collects fewer than that.
type softCollector struct {
	eng   *commands.Engine
	every time.Duration
	// active says whether this node sequences (nil: always, bbolt): on a
	// cluster only the sequencer collects, a follower appends nothing.
	active func() bool
	log    zerolog.Logger

	mu     sync.Mutex // one round at a time
	kick   chan struct{}
	ctx    context.Context
	cancel context.CancelFunc
	done   chan struct{}
	once   sync.Once
}

func newSoftCollector(eng *commands.Engine, every time.Duration, active func() bool, log zerolog.Logger) *softCollector {
	if every <= 0 {
		every = DefaultSoftCollectEvery
	}
	ctx, cancel := context.WithCancel(context.Background())
	c := &softCollector{eng: eng, every: every, active: active, log: log, kick: make(chan struct{}, 1), ctx: ctx, cancel: cancel,
		done: make(chan struct{})}
	c.kick <- struct{}{} // a first round at start
	go c.run()
	return c
}

func (c *softCollector) run() {
	defer close(c.done)
	t := time.NewTicker(c.every)
	defer t.Stop()
	for {
		select {
		case <-c.ctx.Done():
			return
		case <-t.C:
		case <-c.kick:
		}
		if c.active != nil && !c.active() {
			continue
		}
		if _, err := c.collect(c.ctx); err != nil && !errors.Is(err, context.Canceled) &&
			!errors.Is(err, commands.ErrShuttingDown) {
			c.log.Warn().Err(err).Msg("collecting expired soft idempotency records failed; retrying later")
		}
	}
}

// collect runs one round and returns how many records it deleted.
func (c *softCollector) collect(ctx context.Context) (int, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	total := 0
	for {
		res, err := c.eng.Do(ctx, &commands.CollectSoft{Limit: commands.DefaultCollectLimit})
		if err != nil {
			return total, err
		}
		n, _ := res.Value.(int)
		total += n
		if n < commands.DefaultCollectLimit {
			break
		}
	}
	if total > 0 {
		c.log.Info().Int("records", total).Msg("expired soft idempotency records collected")
	}
	return total, nil
}

// close stops the loop and waits for a round in progress.
func (c *softCollector) close() {
	c.once.Do(c.cancel)
	<-c.done
}

// CollectSoft deletes every soft idempotency record ("no task" answers of
// claim-next, quiet heartbeats) expired at the server's time, from memory
// and from disk, now; it returns how many it deleted. The node also does
// this in the background (Config.SoftCollectEvery).
func (n *Node) CollectSoft(ctx context.Context) (int, error) { return n.soft.collect(ctx) }
