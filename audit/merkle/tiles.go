package merkle

import (
	"crypto/sha256"
	"fmt"
	"hash"
	"sync"

	"github.com/transparency-dev/merkle/compact"
)

// LeafSource gives back the leaf hashes of a tiled tree (NewTiled): the
// log the tree was built from.
type LeafSource interface {
	// LeafHashes writes the leaf hashes of leaves from … to-1 (the events
	// of seq from+1 … to) into out, which holds to-from hashes. It is
	// called with no lock of the tree held, from any goroutine, and only
	// for leaves the tree holds; never from inside a read transaction of
	// the tree's caller (see Tree.RootInMemory).
	LeafHashes(from, to uint64, out [][HashSize]byte) error
}

// HashLeafInto writes the leaf hash of raw into dst through h (a SHA-256
// digest the caller reuses): no allocation per leaf.
func HashLeafInto(h hash.Hash, raw []byte, dst *[HashSize]byte) {
	h.Reset()
	h.Write(leafPrefix)
	h.Write(raw)
	h.Sum(dst[:0])
}

var leafPrefix = []byte{rfc6962LeafPrefix}

const (
	rfc6962LeafPrefix = 0
	rfc6962NodePrefix = 1
)

// hashChildren is the RFC 6962 hash of an interior node, allocating
// nothing.
func hashChildren(l, r *[HashSize]byte) [HashSize]byte {
	var b [1 + 2*HashSize]byte
	b[0] = rfc6962NodePrefix
	copy(b[1:], l[:])
	copy(b[1+HashSize:], r[:])
	return sha256.Sum256(b[:])
}

// subtreeRoot is the root of the perfect subtree over leaves (a power of
// two of them), computed in scratch (at least len(leaves)/2 long).
func subtreeRoot(leaves, scratch [][HashSize]byte) [HashSize]byte {
	n := len(leaves)
	if n == 1 {
		return leaves[0]
	}
	for i := 0; i < n/2; i++ {
		scratch[i] = hashChildren(&leaves[2*i], &leaves[2*i+1])
	}
	for n /= 2; n > 1; n /= 2 {
		for i := 0; i < n/2; i++ {
			scratch[i] = hashChildren(&scratch[2*i], &scratch[2*i+1])
		}
	}
	return scratch[0]
}

// tileLevels holds the complete nodes of one tile: levels[l][i] is node
// (l, tile<<(height-l) + i); levels[0] are its leaves.
type tileLevels [][][HashSize]byte

// buildLevels computes every complete node over the leaves of one tile
// (all of them for a complete tile, the left part for the right edge).
func buildLevels(leaves [][HashSize]byte, height uint) tileLevels {
	lv := make(tileLevels, 1, height+1)
	lv[0] = leaves
	for l := uint(1); l <= height; l++ {
		below := lv[l-1]
		up := make([][HashSize]byte, len(below)/2)
		for i := range up {
			up[i] = hashChildren(&below[2*i], &below[2*i+1])
		}
		lv = append(lv, up)
	}
	return lv
}

// tileCache keeps the nodes of the few complete tiles read back last
// (an inclusion proof and its leaf hash, the proofs of one bundle, read
// the same tiles): a complete tile never changes.
type tileCache struct {
	mu    sync.Mutex
	tiles [4]cachedTile
	next  int
}

type cachedTile struct {
	index  uint64
	levels tileLevels
}

func (c *tileCache) get(index uint64) tileLevels {
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, e := range c.tiles {
		if e.levels != nil && e.index == index {
			return e.levels
		}
	}
	return nil
}

func (c *tileCache) put(index uint64, lv tileLevels) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.tiles[c.next] = cachedTile{index: index, levels: lv}
	c.next = (c.next + 1) % len(c.tiles)
}

// readPlan is what a read copied under the tree's lock: the kept hashes,
// the roots of the complete tiles to read back, and the right edge.
type readPlan struct {
	height uint
	ids    []compact.NodeID
	out    [][]byte          // kept hashes (nil where a tile supplies it)
	tiles  map[uint64][]byte // complete tile → its kept root
	edge   []byte            // copy of the right edge's leaf hashes
	edgeAt uint64            // index of the right edge's tile
}

// plan sorts ids into kept, complete-tile and right-edge nodes (the caller
// holds mu for reading; every id is a complete node of the tree).
func (t *Tree) plan(ids []compact.NodeID) (*readPlan, error) {
	p := &readPlan{height: t.height, ids: ids, out: make([][]byte, len(ids))}
	for i, id := range ids {
		if id.Level >= t.height {
			h, err := t.node(id)
			if err != nil {
				return nil, err
			}
			p.out[i] = append([]byte(nil), h...)
			continue
		}
		tile := id.Index >> (t.height - id.Level)
		if (tile+1)<<t.height <= t.rng.End() {
			if p.tiles == nil {
				p.tiles = make(map[uint64][]byte)
			}
			if _, ok := p.tiles[tile]; !ok {
				root, err := t.node(compact.NewNodeID(t.height, tile))
				if err != nil {
					return nil, err
				}
				p.tiles[tile] = append([]byte(nil), root...)
			}
			continue
		}
		if p.edge == nil {
			p.edge, p.edgeAt = append([]byte{}, t.edge...), tile
		}
	}
	return p, nil
}

// finish reads back the planned tiles and fills in the hashes (no lock of
// the tree held).
func (p *readPlan) finish(t *Tree) ([][]byte, error) {
	got := make(map[uint64]tileLevels, len(p.tiles)+1)
	for tile, root := range p.tiles {
		lv, err := t.readTile(tile, root)
		if err != nil {
			return nil, err
		}
		got[tile] = lv
	}
	if p.edge != nil {
		leaves := make([][HashSize]byte, len(p.edge)/HashSize)
		for i := range leaves {
			copy(leaves[i][:], p.edge[i*HashSize:])
		}
		got[p.edgeAt] = buildLevels(leaves, p.height)
	}
	for i, id := range p.ids {
		if p.out[i] != nil {
			continue
		}
		tile := id.Index >> (p.height - id.Level)
		lv := got[tile]
		at := id.Index - tile<<(p.height-id.Level)
		if lv == nil || at >= uint64(len(lv[id.Level])) {
			return nil, fmt.Errorf("merkle: node (%d, %d) is not stored", id.Level, id.Index)
		}
		h := lv[id.Level][at]
		p.out[i] = h[:]
	}
	return p.out, nil
}

// readTile returns the nodes of a complete tile: from the cache, or read
// back through the leaf source and checked against the tile's kept root.
func (t *Tree) readTile(tile uint64, root []byte) (tileLevels, error) {
	if lv := t.cache.get(tile); lv != nil {
		return lv, nil
	}
	leaves := make([][HashSize]byte, 1<<t.height)
	from := tile << t.height
	if err := t.src.LeafHashes(from, from+uint64(len(leaves)), leaves); err != nil {
		return nil, fmt.Errorf("merkle: read back the leaves %d…%d: %w", from, from+uint64(len(leaves))-1, err)
	}
	lv := buildLevels(leaves, t.height)
	if got := lv[t.height][0]; string(got[:]) != string(root) {
		return nil, fmt.Errorf("%w: leaves %d…%d", ErrTile, from, from+uint64(len(leaves))-1)
	}
	t.cache.put(tile, lv)
	return lv, nil
}
