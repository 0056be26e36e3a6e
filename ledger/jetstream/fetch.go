package jetstream

import (
	"context"
	"fmt"
	"time"

	natsjs "github.com/nats-io/nats.go/jetstream"
)

// Reads of this many messages or more stream through an ordered consumer
// instead of one direct get per message.
const (
	consumerFrom  = 8
	consumerFetch = 256
)

// read calls fn with the body of every message from JetStream sequence
// from through to, in order.
func (l *Log) read(ctx context.Context, from, to uint64, fn func(js uint64, body []byte) error) error {
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
		}
		return nil
	}
	cons, err := l.stream.OrderedConsumer(ctx, natsjs.OrderedConsumerConfig{
		DeliverPolicy: natsjs.DeliverByStartSequencePolicy, OptStartSeq: from, InactiveThreshold: 30 * time.Second})
	if err != nil {
		return fmt.Errorf("jetstream: read from message %d: %w", from, err)
	}
	for next := from; next <= to; {
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
