package jetstream

import (
	"errors"
	"fmt"

	"taskledger/ledger"
)

// RangeRaw calls fn with the stored envelope of every event with
// seq > after, in order (ledger.ErrStop from fn ends it quietly).
func (l *Log) RangeRaw(after uint64, fn func(seq uint64, raw []byte) error) error {
	if err := l.sync(); err != nil {
		return err
	}
	l.mu.Lock()
	batches := l.batches // append-only: this prefix never changes
	l.mu.Unlock()
	err := l.rangeBatches(batches[locate(batches, after+1):], func(seq uint64, raw []byte) error {
		if seq <= after {
			return nil
		}
		return fn(seq, raw)
	})
	if errors.Is(err, ledger.ErrStop) {
		return nil
	}
	return err
}

func (l *Log) rangeBatches(batches []batchRef, fn func(seq uint64, raw []byte) error) error {
	ctx, cancel := l.ctx()
	defer cancel()
	if len(batches) == 0 {
		return nil
	}
	// Batch k is message k: a contiguous run of messages.
	first := batches[0].js
	return l.read(ctx, first, batches[len(batches)-1].js, func(js uint64, body []byte) error {
		seq := batches[js-first].first
		return eachEnvelope(body, func(raw []byte) error {
			defer func() { seq++ }()
			return fn(seq, raw)
		})
	})
}

// Range calls fn for every event with seq > after, in order.
func (l *Log) Range(after uint64, fn func(*ledger.Event) error) error {
	return l.RangeRaw(after, func(seq uint64, raw []byte) error {
		e, err := ledger.DecodeEvent(raw)
		if err != nil {
			return fmt.Errorf("seq %d: %w", seq, err)
		}
		return fn(&e)
	})
}

// Stream calls fn for every event of stream, in stream order.
func (l *Log) Stream(stream string, fn func(*ledger.Event) error) error {
	if err := l.sync(); err != nil {
		return err
	}
	l.mu.Lock()
	seqs := append([]uint64(nil), l.streams[stream]...)
	batches := l.batches
	l.mu.Unlock()
	var cur []byte // the envelopes of the batch read last, by position
	var curBatch = -1
	var raws [][]byte
	ctx, cancel := l.ctx()
	defer cancel()
	for _, seq := range seqs {
		i := locate(batches, seq)
		if i == len(batches) {
			return fmt.Errorf("%w: stream %s points at missing seq %d", ledger.ErrCorrupt, stream, seq)
		}
		if i != curBatch {
			m, err := l.stream.GetMsg(ctx, batches[i].js)
			if err != nil {
				return fmt.Errorf("jetstream: read message %d: %w", batches[i].js, err)
			}
			cur, curBatch, raws = m.Data, i, raws[:0]
			if err := eachEnvelope(cur, func(raw []byte) error { raws = append(raws, raw); return nil }); err != nil {
				return err
			}
		}
		k := seq - batches[i].first
		if k >= uint64(len(raws)) {
			return fmt.Errorf("%w: message %d does not hold seq %d", ErrMessage, batches[i].js, seq)
		}
		e, err := ledger.DecodeEvent(raws[k])
		if err != nil {
			return err
		}
		if err := fn(&e); err != nil {
			if errors.Is(err, ledger.ErrStop) {
				return nil
			}
			return err
		}
	}
	return nil
}
