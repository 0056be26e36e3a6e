// Package merkle keeps the RFC 6962 Merkle tree over the log: every
// event's stored bytes (its msgpack envelope, exactly as the events bucket
// holds it) is one leaf, leaf i being the event of seq i+1. The tree maths
// (leaf and node hashing, compact ranges, proof shapes) are those of
// github.com/transparency-dev/merkle; this package only stores the hashes
// of the complete subtrees so that roots and proofs can be answered for
// every size up to the current one.
//
// A tree made by NewTiled keeps only the nodes at levels ≥ its tile
// height (the roots of complete tiles of 2^height leaves and above) and
// the leaf hashes of the incomplete tile at the right edge; a node below
// that a root or proof needs is recomputed from the leaves of its tile,
// read back through a LeafSource and checked against the tile's kept root
// (tiles.go). A tree made by New keeps every node.
//
// The tree is derived from the log like a projection: it is rebuilt from
// the events at start (Load) and extended after every commit (Append).
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
	// ErrTile is a tile whose leaves, read back through the leaf source,
	// do not hash to the root the tree kept: the log changed under the
	// tree.
	ErrTile = errors.New("merkle: the leaves read back for a tile do not hash to the root the tree kept")
	// ErrNotEmpty is a Load into a tree that already holds leaves.
	ErrNotEmpty = errors.New("merkle: load into a tree that holds leaves")
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
// proofs. A reader that needs a tile's leaves reads them through the leaf
// source with no lock held: the committer never waits for a read.
type Tree struct {
	mu  sync.RWMutex
	rng *compact.Range
	// height is the tile height: nodes of the levels below it are not
	// kept (0: every node is kept, and src is nil).
	height uint
	src    LeafSource
	// levels[l] (l ≥ height) holds the hashes of the complete nodes of
	// level l, in index order, HashSize bytes each, in chunks of
	// chunkHashes hashes: a chunk, once full, is never copied, so an
	// append costs the same at a billion leaves as at a thousand (one
	// growing slice was copied whole, 32 bytes per leaf, on the committer
	// at every growth of a quarter). The levels below height stay nil.
	levels [][][]byte
	// edge holds the leaf hashes of the incomplete tile at the right edge
	// (height > 0): leaves size&^(2^height-1) … size-1.
	edge  []byte
	cache tileCache
}

// chunkHashes is the number of hashes per chunk of a level (32 KiB, the
// largest small allocation: no page-aligned large object per chunk).
var chunkHashes = 1024

// New returns the empty tree that keeps every node (two hashes, 64 bytes,
// per leaf): for a log whose leaves cannot be read back.
func New() *Tree { return &Tree{rng: factory.NewEmptyRange(0)} }

// MaxTileHeight is the highest tile height NewTiled takes (tiles of 4,096
// leaves, 128 KiB of leaf hashes to read back per recomputed node).
const MaxTileHeight = 12

// NewTiled returns the empty tree that keeps only the nodes at levels ≥
// height (1 … MaxTileHeight) and the leaf hashes of the right edge's
// incomplete tile, and reads the leaves of any other tile back from src
// when a root or proof needs a node below height. A height of 0 or a nil
// src gives New's tree.
func NewTiled(height uint, src LeafSource) *Tree {
	if height == 0 || src == nil {
		return New()
	}
	return &Tree{rng: factory.NewEmptyRange(0), height: min(height, MaxTileHeight), src: src}
}

// TileHeight is the tree's tile height (0: every node is kept).
func (t *Tree) TileHeight() uint { return t.height }

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
	}
	for _, h := range hashes {
		if err := t.rng.Append(h, t.store); err != nil {
			return err
		}
	}
	return nil
}

// appendTile adds the root of a complete tile of 2^height leaves to a tree
// whose size is a multiple of the tile size (the caller holds mu).
func (t *Tree) appendTile(root []byte) error {
	end := t.rng.End()
	r, err := factory.NewRange(end, end+1<<t.height, [][]byte{root})
	if err != nil {
		return err
	}
	t.store(compact.NewNodeID(t.height, end>>t.height), root)
	return t.rng.AppendRange(r, t.store)
}

// store keeps a node the compact range completed (the caller holds mu).
func (t *Tree) store(id compact.NodeID, hash []byte) {
	if id.Level < t.height {
		if id.Level == 0 {
			t.edge = append(t.edge, hash...)
		}
		return
	}
	if t.height > 0 && id.Level == t.height {
		t.edge = t.edge[:0] // the tile is complete: its root stands for its leaves
	}
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

// node returns the kept hash of a complete node at a level ≥ height (the
// caller holds mu).
func (t *Tree) node(id compact.NodeID) ([]byte, error) {
	if id.Level >= t.height && id.Level < uint(len(t.levels)) {
		chunks := t.levels[id.Level]
		c, off := id.Index/uint64(chunkHashes), id.Index%uint64(chunkHashes)*HashSize
		if c < uint64(len(chunks)) && off+HashSize <= uint64(len(chunks[c])) {
			return chunks[c][off : off+HashSize : off+HashSize], nil
		}
	}
	return nil, fmt.Errorf("merkle: node (%d, %d) is not stored", id.Level, id.Index)
}

// hashes returns the hashes of complete nodes: under the read lock it
// copies those kept and the right edge's leaves, and notes the tiles
// whose leaves must be read back; then, with no lock held, it reads and
// checks those tiles and recomputes the rest.
func (t *Tree) hashes(ids []compact.NodeID, size uint64) ([][]byte, error) {
	t.mu.RLock()
	if size > t.rng.End() {
		end := t.rng.End()
		t.mu.RUnlock()
		return nil, fmt.Errorf("%w: size %d, tree %d", ErrSize, size, end)
	}
	p, err := t.plan(ids)
	t.mu.RUnlock()
	if err != nil {
		return nil, err
	}
	return p.finish(t)
}

// Root returns the root hash of the tree of the given size.
func (t *Tree) Root(size uint64) ([]byte, error) {
	t.mu.RLock()
	end := t.rng.End()
	switch {
	case size > end:
		t.mu.RUnlock()
		return nil, fmt.Errorf("%w: size %d, tree %d", ErrSize, size, end)
	case size == 0:
		t.mu.RUnlock()
		return EmptyRoot(), nil
	case size == end:
		defer t.mu.RUnlock()
		return t.rng.GetRootHash(nil)
	}
	t.mu.RUnlock()
	hs, err := t.hashes(compact.RangeNodes(0, size, nil), size)
	if err != nil {
		return nil, err
	}
	r, err := factory.NewRange(0, size, hs)
	if err != nil {
		return nil, err
	}
	return r.GetRootHash(nil)
}

// RootInMemory is Root(size) when no leaf needs reading back: a tree
// that keeps every node, the current size, a multiple of the tile size or
// a size inside the right edge's tile; ok is false otherwise. It is for a
// caller inside a read transaction of the store the leaf source reads (a
// second read transaction opened by the same goroutine can wait forever
// behind a writer that grows the file).
func (t *Tree) RootInMemory(size uint64) (root []byte, ok bool) {
	t.mu.RLock()
	if size > t.rng.End() {
		t.mu.RUnlock()
		return nil, false
	}
	if size == 0 || size == t.rng.End() {
		defer t.mu.RUnlock()
		if size == 0 {
			return EmptyRoot(), true
		}
		r, err := t.rng.GetRootHash(nil)
		return r, err == nil
	}
	p, err := t.plan(compact.RangeNodes(0, size, nil))
	t.mu.RUnlock()
	if err != nil || len(p.tiles) > 0 {
		return nil, false
	}
	hs, err := p.finish(t)
	if err != nil {
		return nil, false
	}
	r, err := factory.NewRange(0, size, hs)
	if err != nil {
		return nil, false
	}
	root, err = r.GetRootHash(nil)
	return root, err == nil
}

// LeafHashAt returns the hash of leaf index (seq index+1).
func (t *Tree) LeafHashAt(index uint64) ([]byte, error) {
	if size := t.Size(); index >= size {
		return nil, fmt.Errorf("%w: leaf %d, tree %d", ErrIndex, index, size)
	}
	hs, err := t.hashes([]compact.NodeID{compact.NewNodeID(0, index)}, index+1)
	if err != nil {
		return nil, err
	}
	return hs[0], nil
}

// Inclusion returns the RFC 6962 inclusion proof of leaf index in the tree
// of the given size.
func (t *Tree) Inclusion(index, size uint64) ([][]byte, error) {
	if end := t.Size(); size > end {
		return nil, fmt.Errorf("%w: size %d, tree %d", ErrSize, size, end)
	}
	if index >= size {
		return nil, fmt.Errorf("%w: leaf %d, size %d", ErrIndex, index, size)
	}
	nodes, err := proof.Inclusion(index, size)
	if err != nil {
		return nil, err
	}
	return t.rehash(nodes, size)
}

// Consistency returns the RFC 6962 consistency proof between the trees of
// sizes from and to.
func (t *Tree) Consistency(from, to uint64) ([][]byte, error) {
	if end := t.Size(); to > end {
		return nil, fmt.Errorf("%w: size %d, tree %d", ErrSize, to, end)
	}
	if from > to {
		return nil, fmt.Errorf("%w: %d > %d", ErrRange, from, to)
	}
	nodes, err := proof.Consistency(from, to)
	if err != nil {
		return nil, err
	}
	return t.rehash(nodes, to)
}

func (t *Tree) rehash(nodes proof.Nodes, size uint64) ([][]byte, error) {
	hs, err := t.hashes(nodes.IDs, size)
	if err != nil {
		return nil, err
	}
	return nodes.Rehash(hs, hasher.HashChildren)
}

// Equal reports whether two trees hold the same leaves: the same size and
// compact range (so the same root), and, for two trees of one tile
// height, the same kept nodes.
func (t *Tree) Equal(o *Tree) bool {
	t.mu.RLock()
	defer t.mu.RUnlock()
	o.mu.RLock()
	defer o.mu.RUnlock()
	if t.rng.End() != o.rng.End() || !t.rng.Equal(o.rng) {
		return false
	}
	if t.height != o.height {
		return true
	}
	if len(t.levels) != len(o.levels) || !bytes.Equal(t.edge, o.edge) {
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
	return true
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
