package merkle

import "github.com/transparency-dev/merkle/compact"

// RootHasher computes the root of the tree over leaves given in order,
// keeping only the compact range (O(log n) hashes): what a backup needs to
// name its copy's root without holding the whole tree.
type RootHasher struct {
	rng *compact.Range
}

// NewRootHasher starts at the empty tree.
func NewRootHasher() *RootHasher { return &RootHasher{rng: factory.NewEmptyRange(0)} }

// Add appends the leaf of an event's stored bytes.
func (h *RootHasher) Add(raw []byte) error { return h.rng.Append(LeafHash(raw), nil) }

// Size is the number of leaves added.
func (h *RootHasher) Size() uint64 { return h.rng.End() }

// Root is the root hash of the leaves added so far.
func (h *RootHasher) Root() ([]byte, error) {
	if h.rng.End() == 0 {
		return EmptyRoot(), nil
	}
	return h.rng.GetRootHash(nil)
}
