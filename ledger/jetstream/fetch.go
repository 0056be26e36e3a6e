package jetstream

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/nats-io/nats.go"
	natsjs "github.com/nats-io/nats.go/jetstream"

	"taskledger/ledger"
)

// Reads of this many messages or more stream through an ordered consumer
// instead of one direct get per message.
const (
	consumerFrom  = 8
	consumerFetch = 256
)

// orderedResetAttempts bounds how often one Fetch of an ordered consumer
// creates its server-side consumer again before it fails (the library's
// default is forever, with no way to cancel: a read in flight when the
// connection closed never returned, and a node shutting down waited on it
// for good). A failed fetch goes to the callers' own retries, which stop
// when the node closes.
const orderedResetAttempts = 3

// orderedFrom is an ordered consumer of the stream from message from.
func (l *Log) orderedFrom(ctx context.Context, from uint64) (natsjs.Consumer, error) {
	return l.stream.OrderedConsumer(ctx, natsjs.OrderedConsumerConfig{
		DeliverPolicy: natsjs.DeliverByStartSequencePolicy, OptStartSeq: from, InactiveThreshold: 30 * time.Second,
		MaxResetAttempts: orderedResetAttempts})
}

// noResponderRetries bounds how often read starts again after the server
// answered "no responders" (a JetStream API request that found no server
// to take it: a cluster electing a leader, a server starved of CPU).
const noResponderRetries = 20

// read calls fn with the body of every message from JetStream sequence
// from through to, in order. A read the cluster answers "no responders",
// or "message not found" (a direct get answered by a replica that has not
// stored yet a message the leader has: every message up to to exists, the
// stream denies deletes), goes on from the first message not yet
// delivered, after a pause.
func (l *Log) read(ctx context.Context, from, to uint64, fn func(js uint64, body []byte) error) error {
	next := from
	for attempt := 1; ; attempt++ {
		err := l.readFrom(ctx, &next, to, fn)
		if err == nil || !(errors.Is(err, nats.ErrNoResponders) || errors.Is(err, natsjs.ErrMsgNotFound)) || attempt >= noResponderRetries {
			return err
		}
		select {
		case <-ctx.Done():
			return err
		case <-time.After(time.Duration(min(attempt, 5)) * 50 * time.Millisecond):
		}
	}
}

// readFrom is one attempt of read; *next is the first message fn has not
// been given.
func (l *Log) readFrom(ctx context.Context, next *uint64, to uint64, fn func(js uint64, body []byte) error) error {
	from := *next
	if to < from {
		return nil
	}
	if to-from+1 < consumerFrom {
		for js := from; js <= to; js++ {
			m, err := l.stream.GetMsg(ctx, js)
			if err != nil {
				return fmt.Errorf("jetstream: read message %d: %w", js, err)
			}
			if err := fn(js, m.Data); err != nil {
				return err
			}
			*next = js + 1
		}
		return nil
	}
	cons, err := l.orderedFrom(ctx, from)
	if err != nil {
		return fmt.Errorf("jetstream: read from message %d: %w", from, err)
	}
	return l.consume(cons, next, to, fn)
}

func (l *Log) consume(cons natsjs.Consumer, nextp *uint64, to uint64, fn func(js uint64, body []byte) error) error {
	next := *nextp
	defer func() { *nextp = next }()
	for next <= to {
		if l.shut.Load() { // each fetch would dial a closed connection again
			return fmt.Errorf("jetstream: read from message %d: %w", next, ledger.ErrClosed)
		}
		batch, err := cons.Fetch(int(min(to-next+1, consumerFetch)), natsjs.FetchMaxWait(l.cfg.Timeout))
		if err != nil {
			return fmt.Errorf("jetstream: read from message %d: %w", next, err)
		}
		got := 0
		for m := range batch.Messages() {
			md, err := m.Metadata()
			if err != nil {
				return fmt.Errorf("jetstream: read message %d: %w", next, err)
			}
			if md.Sequence.Stream != next {
				return fmt.Errorf("%w: message %d where %d was due", ErrMessage, md.Sequence.Stream, next)
			}
			if err := fn(next, m.Data()); err != nil {
				return err
			}
			next++
			got++
		}
		if err := batch.Error(); err != nil {
			return fmt.Errorf("jetstream: read from message %d: %w", next, err)
		}
		if got == 0 {
			return fmt.Errorf("jetstream: read from message %d: no message within %v", next, l.cfg.Timeout)
		}
	}
	return nil
}
