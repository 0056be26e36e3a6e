// Package merkle keeps the RFC 6962 Merkle tree over the log: every
// event's stored bytes (its msgpack envelope, exactly as the events bucket
// holds it) is one leaf, leaf i being the event of seq i+1. The tree maths
// (leaf and node hashing, compact ranges, proof shapes) are those of
// github.com/transparency-dev/merkle; this package only stores the hashes
// of the complete subtrees so that roots and proofs can be answered for
// every size up to the current one.
//
// The tree is derived from the log like a projection: it is rebuilt from
// the events at start and extended after every commit.
package merkle

import (
	"bytes"
	"errors"
	"fmt"
	"sync"

	"github.com/transparency-dev/merkle/compact"
	"github.com/transparency-dev/merkle/proof"
	"github.com/transparency-dev/merkle/rfc6962"
)

// HashSize is the size of a leaf or node hash (SHA-256).
const HashSize = 32

// Errors of the tree.
var (
	// ErrSize is a tree size beyond the current tree.
	ErrSize = errors.New("merkle: tree size is beyond the tree")
	// ErrIndex is a leaf index outside the tree of the given size.
	ErrIndex = errors.New("merkle: leaf is outside the tree of that size")
	// ErrOrder is an append whose first seq does not follow the tree.
	ErrOrder = errors.New("merkle: leaves appended out of order")
	// ErrRange is a consistency request with from > to.
	ErrRange = errors.New("merkle: first size is above the second")
)

var (
	hasher  = rfc6962.DefaultHasher
	factory = &compact.RangeFactory{Hash: hasher.HashChildren}
)

// LeafHash is the RFC 6962 leaf hash of an event's stored bytes.
func LeafHash(raw []byte) []byte { return hasher.HashLeaf(raw) }

// EmptyRoot is the root hash of the empty tree.
func EmptyRoot() []byte { return hasher.EmptyRoot() }

// Tree is the Merkle tree over the log. It is safe for concurrent use: one
// writer (the committer) appends, any number of readers ask for roots and
// proofs.
type Tree struct {
	mu  sync.RWMutex
	rng *compact.Range
	// levels[l] holds the hashes of the complete nodes of level l, in
	// index order, HashSize bytes each (2 hashes per leaf in all), in
	// chunks of chunkHashes hashes: a chunk, once full, is never copied,
	// so an append costs the same at a billion leaves as at a thousand
	// (one growing slice was copied whole, 32 bytes per leaf, on the
	// committer at every growth of a quarter).
	levels [][][]byte
}

// chunkHashes is the number of hashes per chunk of a level (32 KiB, the
// largest small allocation: no page-aligned large object per chunk).
var chunkHashes = 1024

// New returns the empty tree.
func New() *Tree { return &Tree{rng: factory.NewEmptyRange(0)} }

// Size is the number of leaves.
func (t *Tree) Size() uint64 {
	t.mu.RLock()
	defer t.mu.RUnlock()
	return t.rng.End()
}

// Append adds the events of seq first, first+1, … by their stored bytes;
// first must be Size()+1.
func (t *Tree) Append(first uint64, raws [][]byte) error {
	hashes := make([][]byte, len(raws))
	for i, r := range raws { // hashed before the lock: readers wait less
		hashes[i] = LeafHash(r)
	}
	return t.AppendHashes(first, hashes)
}

// AppendHashes adds leaf hashes of the events of seq first, first+1, ….
func (t *Tree) AppendHashes(first uint64, hashes [][]byte) error {
	t.mu.Lock()
	defer t.mu.Unlock()
	if first != t.rng.End()+1 {
		return fmt.Errorf("%w: tree has %d leaves, got seq %d", ErrOrder, t.rng.End(), first)
	}
	for _, h := range hashes {
		if len(h) != HashSize {
			return fmt.Errorf("merkle: leaf hash of %d bytes", len(h))
		}
		if err := t.rng.Append(h, t.store); err != nil {
			return err
		}
	}
	return nil
}

// store keeps a node the compact range completed.
func (t *Tree) store(id compact.NodeID, hash []byte) {
	for uint(len(t.levels)) <= id.Level {
		t.levels = append(t.levels, nil)
	}
	chunks := t.levels[id.Level]
	if n := len(chunks); n == 0 || len(chunks[n-1]) == chunkHashes*HashSize {
		// A level's first chunk grows as a slice does (small trees stay
		// small); every later one is allocated whole.
		c := []byte(nil)
		if n > 0 {
			c = make([]byte, 0, chunkHashes*HashSize)
		}
		chunks = append(chunks, c)
	}
	last := len(chunks) - 1
	chunks[last] = append(chunks[last], hash...)
	t.levels[id.Level] = chunks
}

// node returns the stored hash of a complete node (the caller holds mu).
func (t *Tree) node(id compact.NodeID) ([]byte, error) {
	if id.Level < uint(len(t.levels)) {
		chunks := t.levels[id.Level]
		c, off := id.Index/uint64(chunkHashes), id.Index%uint64(chunkHashes)*HashSize
		if c < uint64(len(chunks)) && off+HashSize <= uint64(len(chunks[c])) {
			return chunks[c][off : off+HashSize : off+HashSize], nil
		}
	}
	return nil, fmt.Errorf("merkle: node (%d, %d) is not stored", id.Level, id.Index)
}

func (t *Tree) hashes(ids []compact.NodeID) ([][]byte, error) {
	out := make([][]byte, len(ids))
	for i, id := range ids {
		h, err := t.node(id)
		if err != nil {
			return nil, err
		}
		out[i] = append([]byte(nil), h...)
	}
	return out, nil
}

// Root returns the root hash of the tree of the given size.
func (t *Tree) Root(size uint64) ([]byte, error) {
	t.mu.RLock()
	defer t.mu.RUnlock()
	return t.rootLocked(size)
}

func (t *Tree) rootLocked(size uint64) ([]byte, error) {
	if size > t.rng.End() {
		return nil, fmt.Errorf("%w: size %d, tree %d", ErrSize, size, t.rng.End())
	}
	if size == 0 {
		return EmptyRoot(), nil
	}
	if size == t.rng.End() {
		return t.rng.GetRootHash(nil)
	}
	hs, err := t.hashes(compact.RangeNodes(0, size, nil))
	if err != nil {
		return nil, err
	}
	r, err := factory.NewRange(0, size, hs)
	if err != nil {
		return nil, err
	}
	return r.GetRootHash(nil)
}

// LeafHashAt returns the hash of leaf index (seq index+1).
func (t *Tree) LeafHashAt(index uint64) ([]byte, error) {
	t.mu.RLock()
	defer t.mu.RUnlock()
	if index >= t.rng.End() {
		return nil, fmt.Errorf("%w: leaf %d, tree %d", ErrIndex, index, t.rng.End())
	}
	h, err := t.node(compact.NewNodeID(0, index))
	return append([]byte(nil), h...), err
}

// Inclusion returns the RFC 6962 inclusion proof of leaf index in the tree
// of the given size.
func (t *Tree) Inclusion(index, size uint64) ([][]byte, error) {
	t.mu.RLock()
	defer t.mu.RUnlock()
	if size > t.rng.End() {
		return nil, fmt.Errorf("%w: size %d, tree %d", ErrSize, size, t.rng.End())
	}
	if index >= size {
		return nil, fmt.Errorf("%w: leaf %d, size %d", ErrIndex, index, size)
	}
	nodes, err := proof.Inclusion(index, size)
	if err != nil {
		return nil, err
	}
	return t.rehash(nodes)
}

// Consistency returns the RFC 6962 consistency proof between the trees of
// sizes from and to.
func (t *Tree) Consistency(from, to uint64) ([][]byte, error) {
	t.mu.RLock()
	defer t.mu.RUnlock()
	if to > t.rng.End() {
		return nil, fmt.Errorf("%w: size %d, tree %d", ErrSize, to, t.rng.End())
	}
	if from > to {
		return nil, fmt.Errorf("%w: %d > %d", ErrRange, from, to)
	}
	nodes, err := proof.Consistency(from, to)
	if err != nil {
		return nil, err
	}
	return t.rehash(nodes)
}

func (t *Tree) rehash(nodes proof.Nodes) ([][]byte, error) {
	hs, err := t.hashes(nodes.IDs)
	if err != nil {
		return nil, err
	}
	return nodes.Rehash(hs, hasher.HashChildren)
}

// Equal reports whether two trees hold the same leaves (same size, same
// stored nodes).
func (t *Tree) Equal(o *Tree) bool {
	t.mu.RLock()
	defer t.mu.RUnlock()
	o.mu.RLock()
	defer o.mu.RUnlock()
	if t.rng.End() != o.rng.End() || len(t.levels) != len(o.levels) {
		return false
	}
	for i := range t.levels {
		if len(t.levels[i]) != len(o.levels[i]) {
			return false
		}
		for j := range t.levels[i] {
			if !bytes.Equal(t.levels[i][j], o.levels[i][j]) {
				return false
			}
		}
	}
	return t.rng.Equal(o.rng)
}

// VerifyInclusion checks an inclusion proof of the leaf of seq (index
// seq-1) with the given leaf hash against the root of a tree of size.
func VerifyInclusion(seq, size uint64, leafHash []byte, p [][]byte, root []byte) error {
	if seq == 0 {
		return fmt.Errorf("%w: seq 0", ErrIndex)
	}
	return proof.VerifyInclusion(hasher, seq-1, size, leafHash, p, root)
}

// VerifyConsistency checks a consistency proof between two roots.
func VerifyConsistency(size1, size2 uint64, p [][]byte, root1, root2 []byte) error {
	return proof.VerifyConsistency(hasher, size1, size2, p, root1, root2)
}
