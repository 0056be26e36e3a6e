package jetstream

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/nats-io/nats.go"
	natsjs "github.com/nats-io/nats.go/jetstream"
)

// Lease errors.
var (
	// ErrLeaseHeld is returned by Acquire while another holder's key lives.
	ErrLeaseHeld = errors.New("jetstream: the lease is held")
	// ErrLeaseLost is returned by Renew and Release when the key is not the
	// revision the caller holds (it expired, or another holder took it).
	ErrLeaseLost = errors.New("jetstream: the lease is no longer ours")
	// ErrNoLease is returned by Current when nobody holds the lease.
	ErrNoLease = errors.New("jetstream: nobody holds the lease")
)

// leaseKey is the one key of the lease bucket.
const leaseKey = "sequencer"

// Lease is the sequencer lease: one key in the bucket NAME_LEASE (history
// 1, same replicas as the stream) whose messages expire TTL after they
// were written (the bucket's max age). Acquire creates the key only when
// it is absent, Renew rewrites it only at the revision the holder has:
// both are compare-and-set on the key's last sequence, so of two nodes
// racing exactly one holds it. Reads go through the bucket stream's leader.
type Lease struct {
	l   *Log
	kv  natsjs.KeyValue
	ttl time.Duration
}

// Lease binds the lease bucket with keys living ttl, creating it when it
// does not exist. Every node of one cluster must use the same ttl: a
// bucket of another TTL (or other replicas) is a *ConfigError, never
// updated. With a start timeout it waits for the servers as Open does.
func (l *Log) Lease(ttl time.Duration) (*Lease, error) {
	if ttl < 100*time.Millisecond {
		return nil, fmt.Errorf("jetstream: lease TTL %v is too short", ttl)
	}
	var kv natsjs.KeyValue
	err := l.retry("the lease bucket "+l.cfg.Name+"_LEASE", func() error {
		var err error
		kv, err = l.bucket("LEASE", ttl)
		return err
	})
	if err != nil {
		return nil, err
	}
	return &Lease{l: l, kv: kv, ttl: ttl}, nil
}

// TTL is how long a written lease lives.
func (le *Lease) TTL() time.Duration { return le.ttl }

// Acquire writes value as the lease when nobody holds it and returns the
// revision now held; ErrLeaseHeld when the key lives.
func (le *Lease) Acquire(value []byte) (uint64, error) {
	var rev uint64
	err := le.l.again(func(ctx context.Context) error {
		var err error
		rev, err = le.kv.Create(ctx, leaseKey, value)
		return err
	})
	if errors.Is(err, natsjs.ErrKeyExists) {
		// Held, unless an earlier attempt of ours created it and its answer
		// was lost.
		if raw, cur, cerr := le.Current(); cerr == nil && bytes.Equal(raw, value) {
			return cur, nil
		}
		return 0, ErrLeaseHeld
	}
	if err != nil {
		return 0, fmt.Errorf("jetstream: acquire the lease: %w", err)
	}
	return rev, nil
}

// Renew rewrites the lease held at rev (its life starts again) and returns
// the new revision; ErrLeaseLost when the key is not at rev any more.
func (le *Lease) Renew(value []byte, rev uint64) (uint64, error) {
	var next uint64
	tries := 0
	err := le.l.again(func(ctx context.Context) error {
		tries++
		var err error
		next, err = le.kv.Update(ctx, leaseKey, value, rev)
		return err
	})
	if errors.Is(err, natsjs.ErrKeyRevisionMismatch) || errors.Is(err, natsjs.ErrKeyNotFound) {
		// Lost, unless an earlier attempt of ours renewed it and its answer
		// was lost: then the key holds our value at the next revisions.
		if tries > 1 {
			if raw, cur, cerr := le.Current(); cerr == nil && cur > rev && bytes.Equal(raw, value) {
				return cur, nil
			}
		}
		return 0, ErrLeaseLost
	}
	if err != nil {
		return 0, fmt.Errorf("jetstream: renew the lease: %w", err)
	}
	return next, nil
}

// Release deletes the lease held at rev (a node stepping down on purpose),
// so another can take it at once; ErrLeaseLost when it is not at rev.
func (le *Lease) Release(rev uint64) error {
	err := le.l.again(func(ctx context.Context) error {
		return le.kv.Delete(ctx, leaseKey, natsjs.LastRevision(rev))
	})
	var apiErr *natsjs.APIError
	if errors.As(err, &apiErr) && (apiErr.ErrorCode == natsjs.JSErrCodeStreamWrongLastSequence ||
		apiErr.ErrorCode == natsjs.JSErrCodeStreamWrongLastSequenceConstant) {
		return ErrLeaseLost
	}
	if err != nil {
		return fmt.Errorf("jetstream: release the lease: %w", err)
	}
	return nil
}

// Current returns the living lease's value and revision; ErrNoLease when
// nobody holds it.
func (le *Lease) Current() ([]byte, uint64, error) {
	var e natsjs.KeyValueEntry
	err := le.l.again(func(ctx context.Context) error {
		var err error
		e, err = le.kv.Get(ctx, leaseKey)
		return err
	})
	if errors.Is(err, natsjs.ErrKeyNotFound) || errors.Is(err, natsjs.ErrKeyDeleted) {
		return nil, 0, ErrNoLease
	}
	if err != nil {
		return nil, 0, fmt.Errorf("jetstream: read the lease: %w", err)
	}
	return append([]byte(nil), e.Value()...), e.Revision(), nil
}

// Appended returns a channel that receives (coalesced) whenever a batch
// message is published on the events subject, and a function that stops
// it. It is a wake-up only: a message seen here may have been refused by
// the stream; readers read the stream itself.
func (l *Log) Appended() (<-chan struct{}, func(), error) {
	ch := make(chan struct{}, 1)
	sub, err := l.nc.Subscribe(l.subject, func(*nats.Msg) {
		select {
		case ch <- struct{}{}:
		default:
		}
	})
	if err != nil {
		return nil, nil, fmt.Errorf("jetstream: subscribe %s: %w", l.subject, err)
	}
	return ch, func() { _ = sub.Unsubscribe() }, nil
}

// CreateAdminToken stores an admin token's hash under name only if no
// token of that name exists, and reports whether it did (the node that
// initializes an empty stream is the one whose create wins).
func (l *Log) CreateAdminToken(name string, hash []byte) (bool, error) {
	ctx, cancel := l.ctx()
	defer cancel()
	_, err := l.meta.Create(ctx, adminPrefix+kvKey(name), hash)
	if errors.Is(err, natsjs.ErrKeyExists) {
		return false, nil
	}
	if err != nil {
		return false, fmt.Errorf("jetstream: admin token: %w", err)
	}
	return true, nil
}

// AdminToken returns the hash stored under name (nil when there is none),
// read through the bucket's leader.
func (l *Log) AdminToken(name string) ([]byte, error) {
	return l.metaValue(adminPrefix + kvKey(name))
}
