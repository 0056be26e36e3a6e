package jetstream

import (
	"encoding/binary"
	"errors"
	"fmt"

	natsjs "github.com/nats-io/nats.go/jetstream"

	"taskledger/ledger"
)

// The transparency log's signed checkpoints on a cluster live in the META
// bucket (replicated like the stream, so they survive the loss of the
// sequencer): one key per signed tree size, and one key holding the newest
// (its size, then the note), which only moves forward.
const (
	checkpointPrefix    = "checkpoint."
	keyLatestCheckpoint = "checkpoint_latest"
)

func checkpointKey(size uint64) string { return fmt.Sprintf("%s%020d", checkpointPrefix, size) }

// PutCheckpoint stores the signed checkpoint of a tree size unless one of
// that size is stored already (the first stays: an auditor may hold it,
// and a new sequencer signs the size its predecessor last signed again),
// and makes it the latest when no larger one is stored (a compare-and-set
// on the latest key: of two signers, the larger size stays).
func (l *Log) PutCheckpoint(size uint64, note []byte) error {
	ctx, cancel := l.ctx()
	defer cancel()
	_, err := l.meta.Create(ctx, checkpointKey(size), note)
	if errors.Is(err, natsjs.ErrKeyExists) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("jetstream: checkpoint %d: %w", size, err)
	}
	val := binary.BigEndian.AppendUint64(make([]byte, 0, 8+len(note)), size)
	val = append(val, note...)
	for {
		e, err := l.meta.Get(ctx, keyLatestCheckpoint)
		switch {
		case errors.Is(err, natsjs.ErrKeyNotFound):
			_, err = l.meta.Create(ctx, keyLatestCheckpoint, val)
		case err != nil:
		case len(e.Value()) >= 8 && binary.BigEndian.Uint64(e.Value()) >= size:
			return nil
		default:
			_, err = l.meta.Update(ctx, keyLatestCheckpoint, val, e.Revision())
		}
		switch {
		case err == nil:
			return nil
		case ctx.Err() != nil:
			return fmt.Errorf("jetstream: latest checkpoint: %w", ctx.Err())
		case !errors.Is(err, natsjs.ErrKeyExists) && !errors.Is(err, natsjs.ErrKeyRevisionMismatch):
			return fmt.Errorf("jetstream: latest checkpoint: %w", err)
		}
		// Another signer moved the latest key meanwhile: read it again.
	}
}

// Checkpoint returns the stored checkpoint of a tree size; ledger.ErrNotFound
// if none was signed at that size.
func (l *Log) Checkpoint(size uint64) ([]byte, error) {
	v, err := l.metaValue(checkpointKey(size))
	if err == nil && v == nil {
		err = fmt.Errorf("%w: no checkpoint of size %d", ledger.ErrNotFound, size)
	}
	return v, err
}

// LatestCheckpoint returns the stored checkpoint of the largest size;
// ledger.ErrNotFound if there is none.
func (l *Log) LatestCheckpoint() (uint64, []byte, error) {
	v, err := l.metaValue(keyLatestCheckpoint)
	switch {
	case err != nil:
		return 0, nil, err
	case v == nil:
		return 0, nil, fmt.Errorf("%w: no checkpoint", ledger.ErrNotFound)
	case len(v) < 8:
		return 0, nil, fmt.Errorf("%w: latest checkpoint of %d bytes", ledger.ErrCorrupt, len(v))
	}
	return binary.BigEndian.Uint64(v), v[8:], nil
}
