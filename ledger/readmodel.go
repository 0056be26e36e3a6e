package ledger

import (
	"bytes"
	"fmt"
	"strings"

	bolt "go.etcd.io/bbolt"
)

// ReadModelPrefix begins the name of every bucket of the on-disk read
// model: the projection of finished tasks kept beside the log in the same
// file (written by projections, see docs/operations.md). The ledger knows
// nothing of what they hold: it writes and reads them as key-value pairs,
// in the transaction of the batch that carries them.
const ReadModelPrefix = "readmodel/"

// ReadModelWrite is one put (Value != nil) or delete (Value == nil) of a
// read-model bucket, written in the batch's transaction.
type ReadModelWrite struct {
	Bucket string // begins with ReadModelPrefix
	Key    []byte
	Value  []byte
}

// writeReadModel applies a batch's read-model writes (Reset first: every
// read-model bucket is dropped).
func writeReadModel(tx *bolt.Tx, reset bool, ws []ReadModelWrite) error {
	if reset {
		var names [][]byte
		if err := tx.ForEach(func(name []byte, _ *bolt.Bucket) error {
			if bytes.HasPrefix(name, []byte(ReadModelPrefix)) {
				names = append(names, bytes.Clone(name))
			}
			return nil
		}); err != nil {
			return err
		}
		for _, n := range names {
			if err := tx.DeleteBucket(n); err != nil {
				return err
			}
		}
	}
	var b *bolt.Bucket
	var name string
	for i, w := range ws {
		if !strings.HasPrefix(w.Bucket, ReadModelPrefix) {
			return fmt.Errorf("%w: read-model bucket %q", ErrBadBatch, w.Bucket)
		}
		if b == nil || name != w.Bucket {
			var err error
			if b, err = tx.CreateBucketIfNotExists([]byte(w.Bucket)); err != nil {
				return err
			}
			name = w.Bucket
			if appends(b, ws[i:]) {
				b.FillPercent = 1.0
			}
		}
		var err error
		if w.Value == nil {
			err = b.Delete(w.Key)
		} else {
			err = b.Put(w.Key, w.Value)
		}
		if err != nil {
			return err
		}
	}
	return nil
}

// appends reports whether the run of writes to b at the head of ws puts
// only keys past b's last, in ascending order (deletes aside): then the pages it fills
// are filled whole (bbolt's default leaves every page it splits half
// empty, which for keys that only grow, as the records' seqs, is half the
// bucket's pages wasted for good).
func appends(b *bolt.Bucket, ws []ReadModelWrite) bool {
	last, _ := b.Cursor().Last()
	for _, w := range ws {
		if w.Bucket != ws[0].Bucket {
			break
		}
		if w.Value == nil { // a delete (the records' oldest go from the front)
			continue
		}
		if last != nil && bytes.Compare(w.Key, last) <= 0 {
			return false
		}
		last = w.Key
	}
	return true
}

// ReadModelGet returns a copy of the value of key in a read-model bucket
// (nil when absent).
func (s *Store) ReadModelGet(bucket string, key []byte) ([]byte, error) {
	var out []byte
	err := s.db.View(func(tx *bolt.Tx) error {
		if b := tx.Bucket([]byte(bucket)); b != nil {
			if v := b.Get(key); v != nil {
				out = bytes.Clone(v)
			}
		}
		return nil
	})
	return out, err
}

// ReadModelScan calls fn with the pairs of a read-model bucket whose key
// begins with prefix, in key order (descending when reverse), starting at
// from (inclusive; nil: the first, or last, of the prefix), until fn
// returns false or an error. The bytes are valid only during the call.
func (s *Store) ReadModelScan(bucket string, prefix, from []byte, reverse bool, fn func(k, v []byte) (bool, error)) error {
	return s.db.View(func(tx *bolt.Tx) error {
		b := tx.Bucket([]byte(bucket))
		if b == nil {
			return nil
		}
		c := b.Cursor()
		var k, v []byte
		switch {
		case from != nil:
			k, v = c.Seek(from)
			if reverse && (k == nil || !bytes.Equal(k, from)) {
				if k == nil {
					k, v = c.Last()
				} else {
					k, v = c.Prev()
				}
			}
		case !reverse:
			k, v = c.Seek(prefix)
		default:
			k, v = seekLastWithPrefix(c, prefix)
		}
		for k != nil && bytes.HasPrefix(k, prefix) {
			more, err := fn(k, v)
			if err != nil || !more {
				return err
			}
			if reverse {
				k, v = c.Prev()
			} else {
				k, v = c.Next()
			}
		}
		return nil
	})
}

// seekLastWithPrefix positions c on the last key beginning with prefix.
func seekLastWithPrefix(c *bolt.Cursor, prefix []byte) ([]byte, []byte) {
	if len(prefix) == 0 {
		return c.Last()
	}
	end := bytes.Clone(prefix)
	for i := len(end) - 1; i >= 0; i-- { // the first key after every key with the prefix
		if end[i] < 0xff {
			end[i]++
			end = end[:i+1]
			if k, _ := c.Seek(end); k == nil {
				return c.Last()
			}
			return c.Prev()
		}
	}
	return c.Last()
}

// ReadModelBuckets calls fn with every pair of every read-model bucket,
// by bucket name then key (verify compares them with a replay's).
func (s *Store) ReadModelBuckets(fn func(bucket string, k, v []byte) error) error {
	return s.db.View(func(tx *bolt.Tx) error {
		return tx.ForEach(func(name []byte, b *bolt.Bucket) error {
			if !bytes.HasPrefix(name, []byte(ReadModelPrefix)) {
				return nil
			}
			return b.ForEach(func(k, v []byte) error { return fn(string(name), k, v) })
		})
	})
}

// ResetReadModel replaces the whole read model by ws in one transaction
// (a rebuild from the projections, after a schema change or on a file
// written before it existed).
func (s *Store) ResetReadModel(ws []ReadModelWrite) error {
	return s.write(func(tx *bolt.Tx) error { return writeReadModel(tx, true, ws) })
}

// WriteReadModel applies read-model writes in a transaction of their own
// (a rebuild's chunks).
func (s *Store) WriteReadModel(ws []ReadModelWrite) error {
	return s.write(func(tx *bolt.Tx) error { return writeReadModel(tx, false, ws) })
}
