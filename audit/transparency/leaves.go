package transparency

import (
	"crypto/sha256"
	"errors"
	"fmt"

	"taskledger/audit/merkle"
	"taskledger/ledger"
)

// TileHeight is the tile height of the tree a node builds over its log
// (Build): it keeps the roots of complete tiles of 256 leaves and the
// nodes above them (about a quarter of a byte per event) and reads a
// tile's 256 events back from the store when a root or proof needs a
// node inside it (D440).
const TileHeight = 8

// ErrLogShort is a leaf source asked for events the log does not hold
// (the log lost events the tree holds).
var ErrLogShort = errors.New("transparency: the log does not hold every event the Merkle tree holds")

// Leaves is the leaf source of a tiled tree over a store's log: leaf i
// is the stored bytes of the event of seq i+1, read with one cursor.
type Leaves struct {
	Store interface {
		RangeRaw(after uint64, fn func(seq uint64, raw []byte) error) error
	}
}

var _ merkle.LeafSource = Leaves{}

// LeafHashes reads the events of seq from+1 … to and hashes them into out.
func (l Leaves) LeafHashes(from, to uint64, out [][merkle.HashSize]byte) error {
	h := sha256.New()
	next := from
	err := l.Store.RangeRaw(from, func(seq uint64, raw []byte) error {
		if seq != next+1 {
			return fmt.Errorf("%w: seq %d follows seq %d", ErrLogShort, seq, next)
		}
		merkle.HashLeafInto(h, raw, &out[next-from])
		if next++; next == to {
			return ledger.ErrStop
		}
		return nil
	})
	if errors.Is(err, ledger.ErrStop) {
		err = nil
	}
	if err == nil && next < to {
		err = fmt.Errorf("%w: it ends at seq %d, the tree needs seq %d", ErrLogShort, next, to)
	}
	return err
}
