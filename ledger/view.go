package ledger

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io"

	bolt "go.etcd.io/bbolt"
)

// View is a consistent read of the whole log: one bbolt read transaction,
// so every read through it sees the same committed state while the
// sequencer keeps appending (an online backup's copy). It is valid only
// during the call that gave it.
//
// A read transaction holds bbolt's mmap read lock: a commit that has to
// grow the file's mapping waits until the view ends (most commits do not;
// the mapping grows by doubling up to 1 GiB, then by 1 GiB).
type View struct {
	tx *bolt.Tx
}

// View calls fn with a consistent read of the log.
func (s *Store) View(fn func(v *View) error) error {
	return s.db.View(func(tx *bolt.Tx) error { return fn(&View{tx: tx}) })
}

// Head is the committed head the view sees.
func (v *View) Head() (Head, error) { return readHead(v.tx) }

// Size is the size in bytes of the file WriteTo writes.
func (v *View) Size() int64 { return v.tx.Size() }

// WriteTo writes the whole ledger file as of the view (bbolt's Tx.WriteTo:
// a file that opens as the log at the view's head, checkpoints and soft
// records included).
func (v *View) WriteTo(w io.Writer) (int64, error) {
	n, err := v.tx.WriteTo(w)
	if err != nil {
		return n, fmt.Errorf("ledger: copy the log: %w", err)
	}
	return n, nil
}

// RangeRaw calls fn with the stored bytes of every event with seq > after,
// as of the view. The bytes are only valid during the call.
func (v *View) RangeRaw(after uint64, fn func(seq uint64, raw []byte) error) error {
	c := v.tx.Bucket(bucketEvents).Cursor()
	for k, val := c.Seek(u64(after + 1)); k != nil; k, val = c.Next() {
		if len(k) != 8 {
			return fmt.Errorf("%w: key of length %d", ErrCorrupt, len(k))
		}
		if err := fn(binary.BigEndian.Uint64(k), val); err != nil {
			if errors.Is(err, ErrStop) {
				return nil
			}
			return err
		}
	}
	return nil
}

// RangeTransient is Store.RangeTransient as of the view: the events'
// bodies and hashes are valid only during the call.
func (v *View) RangeTransient(after uint64, fn func(*Event) error) error {
	return rangeTransient(v.RangeRaw, after, fn)
}
