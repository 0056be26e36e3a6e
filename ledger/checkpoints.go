package ledger

import (
	"encoding/binary"
	"errors"
	"fmt"

	bolt "go.etcd.io/bbolt"
)

// The checkpoints bucket holds the signed checkpoints of the Merkle tree
// over the log (audit/merkle, audit/checkpoint): key big-endian uint64
// tree size, value the signed note. It is derived data outside the hash
// chain, created by the first checkpoint written (a ledger that never
// signed one has no such bucket).
var bucketCheckpoints = []byte("checkpoints")

// PutCheckpoint stores the signed checkpoint of a tree size (replacing one
// of the same size).
func (s *Store) PutCheckpoint(size uint64, note []byte) error {
	return s.write(func(tx *bolt.Tx) error {
		b, err := tx.CreateBucketIfNotExists(bucketCheckpoints)
		if err != nil {
			return err
		}
		return b.Put(u64(size), note)
	})
}

// Checkpoint returns the stored checkpoint of a tree size; ErrNotFound if
// none was signed at that size.
func (s *Store) Checkpoint(size uint64) ([]byte, error) {
	var out []byte
	err := s.db.View(func(tx *bolt.Tx) error {
		if b := tx.Bucket(bucketCheckpoints); b != nil {
			out = append([]byte(nil), b.Get(u64(size))...)
		}
		if len(out) == 0 {
			return fmt.Errorf("%w: no checkpoint of size %d", ErrNotFound, size)
		}
		return nil
	})
	return out, err
}

// LatestCheckpoint returns the stored checkpoint of the largest size;
// ErrNotFound if there is none.
func (s *Store) LatestCheckpoint() (uint64, []byte, error) {
	var size uint64
	var out []byte
	err := s.db.View(func(tx *bolt.Tx) error {
		b := tx.Bucket(bucketCheckpoints)
		if b == nil {
			return fmt.Errorf("%w: no checkpoint", ErrNotFound)
		}
		k, v := b.Cursor().Last()
		if k == nil {
			return fmt.Errorf("%w: no checkpoint", ErrNotFound)
		}
		if len(k) != 8 {
			return fmt.Errorf("%w: checkpoint key of length %d", ErrCorrupt, len(k))
		}
		size, out = binary.BigEndian.Uint64(k), append([]byte(nil), v...)
		return nil
	})
	return size, out, err
}

// CheckpointSizes calls fn with every stored checkpoint's size, ascending.
func (s *Store) CheckpointSizes(fn func(size uint64, note []byte) error) error {
	return s.db.View(func(tx *bolt.Tx) error {
		b := tx.Bucket(bucketCheckpoints)
		if b == nil {
			return nil
		}
		return b.ForEach(func(k, v []byte) error {
			if len(k) != 8 {
				return fmt.Errorf("%w: checkpoint key of length %d", ErrCorrupt, len(k))
			}
			return fn(binary.BigEndian.Uint64(k), append([]byte(nil), v...))
		})
	})
}

// CheckpointsNewestFirst calls fn with the stored checkpoints from the
// largest size down, until fn returns ErrStop (then nil) or another error.
func (s *Store) CheckpointsNewestFirst(fn func(size uint64, note []byte) error) error {
	err := s.db.View(func(tx *bolt.Tx) error {
		b := tx.Bucket(bucketCheckpoints)
		if b == nil {
			return nil
		}
		c := b.Cursor()
		for k, v := c.Last(); k != nil; k, v = c.Prev() {
			if len(k) != 8 {
				return fmt.Errorf("%w: checkpoint key of length %d", ErrCorrupt, len(k))
			}
			if err := fn(binary.BigEndian.Uint64(k), append([]byte(nil), v...)); err != nil {
				return err
			}
		}
		return nil
	})
	if errors.Is(err, ErrStop) {
		return nil
	}
	return err
}
