package jetstream

import (
	"context"
	"encoding/hex"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/nats-io/nats.go"
	natsjs "github.com/nats-io/nats.go/jetstream"

	"taskledger/ledger"
)

// Meta bucket keys.
const (
	keyManualClock = "manual_clock"
	keySecretCheck = "secret_check"
	adminPrefix    = "admin."
)

// kvKey maps a ledger key to a key-value key: letters, digits, '-', '_'
// and '/' stay; every other byte (including '.' and '=') becomes '=' and
// two hex digits. The mapping is one to one and keeps prefixes, so a
// prefix scan of ledger keys is a prefix scan of bucket keys.
func kvKey(k string) string {
	var b strings.Builder
	for i := 0; i < len(k); i++ {
		c := k[i]
		if c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '-' || c == '_' || c == '/' {
			b.WriteByte(c)
		} else {
			fmt.Fprintf(&b, "=%02x", c)
		}
	}
	if b.Len() == 0 {
		return "="
	}
	return b.String()
}

func unKVKey(k string) (string, error) {
	if k == "=" {
		return "", nil
	}
	var b strings.Builder
	for i := 0; i < len(k); i++ {
		if k[i] != '=' {
			b.WriteByte(k[i])
			continue
		}
		if i+3 > len(k) {
			return "", fmt.Errorf("%w: key %q", ledger.ErrCorrupt, k)
		}
		c, err := hex.DecodeString(k[i+1 : i+3])
		if err != nil {
			return "", fmt.Errorf("%w: key %q", ledger.ErrCorrupt, k)
		}
		b.Write(c)
		i += 2
	}
	return b.String(), nil
}

// writeRecords writes a batch's soft records and meta changes (after its
// events, if any, are stored). The soft records are published all at once
// (the puts and deletes of the key-value bucket, as messages on its
// stream's subjects) and their acknowledgements awaited together: one
// round trip for the batch, not one per record.
func (l *Log) writeRecords(b *ledger.Batch) error {
	if err := l.writeSoft(b.Soft); err != nil {
		return err
	}
	if b.ManualClock != nil {
		v, err := ledger.Marshal(b.ManualClock)
		if err != nil {
			return err
		}
		if err := l.again(func(ctx context.Context) error { _, err := l.meta.Put(ctx, keyManualClock, v); return err }); err != nil {
			return fmt.Errorf("jetstream: manual clock: %w", err)
		}
	}
	if b.SecretCheck != nil {
		if err := l.again(func(ctx context.Context) error { _, err := l.meta.Put(ctx, keySecretCheck, b.SecretCheck); return err }); err != nil {
			return fmt.Errorf("jetstream: secret check: %w", err)
		}
	}
	return nil
}

// each calls fn with every live key (ledger form) and value of kv whose
// bucket key matches filter.
func each(ctx context.Context, kv natsjs.KeyValue, filter string, fn func(key string, value []byte) error) error {
	for {
		// A watch is served by a consumer that may sit on a replica behind
		// the stream's leader: a read of the whole bucket goes on until it
		// has seen the leader's last message (a delete marker included), so
		// a record written and acknowledged before the read is never missed
		// or read stale.
		var want uint64
		if filter == natsjs.AllKeys {
			st, err := kv.Status(ctx)
			if err != nil {
				return fmt.Errorf("jetstream: status %s: %w", kv.Bucket(), err)
			}
			if bs, ok := st.(*natsjs.KeyValueBucketStatus); ok && bs.StreamInfo() != nil {
				want = bs.StreamInfo().State.LastSeq
			}
		}
		keys, values, seen, err := watchAll(ctx, kv, filter)
		if err != nil {
			return err
		}
		if seen < want {
			select {
			case <-time.After(20 * time.Millisecond):
				continue
			case <-ctx.Done():
				return fmt.Errorf("jetstream: read %s: %w", kv.Bucket(), ctx.Err())
			}
		}
		for n, k := range keys {
			if err := fn(k, values[n]); err != nil {
				return err
			}
		}
		return nil
	}
}

// watchAll reads the current value of every key of kv matching filter, in
// the order delivered, and the highest stream sequence it saw (deletes
// included).
func watchAll(ctx context.Context, kv natsjs.KeyValue, filter string) (keys []string, values [][]byte, seen uint64, err error) {
	w, err := kv.Watch(ctx, filter)
	if err != nil {
		return nil, nil, 0, fmt.Errorf("jetstream: watch %s: %w", kv.Bucket(), err)
	}
	defer w.Stop()
	for {
		select {
		case e, ok := <-w.Updates():
			if !ok {
				return nil, nil, 0, fmt.Errorf("jetstream: watch %s ended early", kv.Bucket())
			}
			if e == nil { // every current value was delivered
				return keys, values, seen, nil
			}
			seen = max(seen, e.Revision())
			if e.Operation() != natsjs.KeyValuePut {
				continue
			}
			k, err := unKVKey(e.Key())
			if err != nil {
				return nil, nil, 0, err
			}
			keys, values = append(keys, k), append(values, append([]byte(nil), e.Value()...))
		case <-ctx.Done():
			return nil, nil, 0, fmt.Errorf("jetstream: read %s: %w", kv.Bucket(), ctx.Err())
		}
	}
}

// SoftReadsWhole says that SoftRecords watches the whole bucket whatever
// the prefix (projections.WholeSoftReader): a load reads it once.
func (l *Log) SoftReadsWhole() {}

// SoftRecords calls fn for every soft record whose key starts with prefix
// (each call watches the whole bucket; the values are copies).
func (l *Log) SoftRecords(prefix string, fn func(key string, value []byte) error) error {
	ctx, cancel := l.ctx()
	defer cancel()
	p := kvKey(prefix)
	if prefix == "" {
		p = ""
	}
	return each(ctx, l.soft, natsjs.AllKeys, func(k string, v []byte) error {
		if !strings.HasPrefix(kvKey(k), p) {
			return nil
		}
		return fn(k, v)
	})
}

func (l *Log) metaValue(key string) ([]byte, error) {
	var e natsjs.KeyValueEntry
	err := l.again(func(ctx context.Context) error {
		var err error
		e, err = l.meta.Get(ctx, key)
		return err
	})
	if errors.Is(err, natsjs.ErrKeyNotFound) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("jetstream: meta %s: %w", key, err)
	}
	return append([]byte(nil), e.Value()...), nil
}

// ManualClock returns the stored manual clock state (zero if none).
func (l *Log) ManualClock() (ledger.ManualClock, error) {
	var mc ledger.ManualClock
	v, err := l.metaValue(keyManualClock)
	if err != nil || v == nil {
		return mc, err
	}
	if err := ledger.Unmarshal(v, &mc); err != nil {
		return mc, fmt.Errorf("%w: manual clock: %v", ledger.ErrCorrupt, err)
	}
	return mc, nil
}

// SecretCheck returns the stored key-check value (nil if none).
func (l *Log) SecretCheck() ([]byte, error) {
	v, err := l.metaValue(keySecretCheck)
	if len(v) == 0 {
		v = nil
	}
	return v, err
}

// PutAdminToken stores (or replaces) an admin token's hash under name.
func (l *Log) PutAdminToken(name string, hash []byte) error {
	ctx, cancel := l.ctx()
	defer cancel()
	if _, err := l.meta.Put(ctx, adminPrefix+kvKey(name), hash); err != nil {
		return fmt.Errorf("jetstream: admin token: %w", err)
	}
	return nil
}

// DeleteAdminToken removes an admin token; ledger.ErrNotFound if there is
// none.
func (l *Log) DeleteAdminToken(name string) error {
	ctx, cancel := l.ctx()
	defer cancel()
	k := adminPrefix + kvKey(name)
	if _, err := l.meta.Get(ctx, k); errors.Is(err, natsjs.ErrKeyNotFound) {
		return ledger.ErrNotFound
	} else if err != nil {
		return fmt.Errorf("jetstream: admin token: %w", err)
	}
	if err := l.meta.Delete(ctx, k); err != nil {
		return fmt.Errorf("jetstream: admin token: %w", err)
	}
	return nil
}

// AdminTokens returns every admin token name with its hash.
func (l *Log) AdminTokens() (map[string][]byte, error) {
	ctx, cancel := l.ctx()
	defer cancel()
	// The whole bucket (a few keys): only a read of every key waits for
	// the leader's last message, so a token put and acknowledged just
	// before is never missed by a watch served from a replica behind it.
	var names []string
	err := each(ctx, l.meta, natsjs.AllKeys, func(k string, _ []byte) error {
		if name, ok := strings.CutPrefix(k, adminPrefix); ok {
			names = append(names, name)
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	// The values through the leader (the watch's may lag a put).
	out := make(map[string][]byte, len(names))
	for _, n := range names {
		e, err := l.meta.Get(ctx, adminPrefix+kvKey(n))
		if errors.Is(err, natsjs.ErrKeyNotFound) {
			continue
		}
		if err != nil {
			return nil, fmt.Errorf("jetstream: admin token: %w", err)
		}
		out[n] = append([]byte(nil), e.Value()...)
	}
	return out, nil
}

// writeSoft publishes every soft record without waiting, then waits for
// every acknowledgement (at most the Timeout). A record of a key written
// twice in the batch is stored in the batch's order: the stream stores
// the messages of one publisher in the order they were sent.
func (l *Log) writeSoft(recs []ledger.SoftRecord) error {
	if len(recs) == 0 {
		return nil
	}
	prefix := "$KV." + l.soft.Bucket() + "."
	futs := make([]natsjs.PubAckFuture, len(recs))
	for i, r := range recs {
		m := nats.NewMsg(prefix + kvKey(r.Key))
		if r.Value == nil {
			m.Header.Set("KV-Operation", "DEL")
		} else {
			m.Data = r.Value
		}
		f, err := l.js.PublishMsgAsync(m)
		if err != nil {
			return fmt.Errorf("jetstream: soft record %q: %w", r.Key, err)
		}
		futs[i] = f
	}
	t := time.NewTimer(l.cfg.Timeout)
	defer t.Stop()
	for i, f := range futs {
		select {
		case <-f.Ok():
		case err := <-f.Err():
			return fmt.Errorf("jetstream: soft record %q: %w", recs[i].Key, err)
		case <-t.C:
			return fmt.Errorf("jetstream: soft record %q: %w", recs[i].Key, natsjs.ErrAsyncPublishTimeout)
		}
	}
	return nil
}
