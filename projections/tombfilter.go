package projections

import (
	"encoding/binary"
	"slices"
)

// tombFilter is a compact filter of every tombstone the log made (a
// scalable Bloom filter): a lookup of a key that never expired — nearly
// every fresh key — is answered "no" from memory, and only the few it
// cannot rule out (about 1%) read the read model's tombstone index on
// disk. It holds 10 bits per tombstone (up to twice that in the newest
// segment's unused room) instead of the tombstones themselves. Segments
// double in capacity; only the newest one changes, so a capture copies it
// and shares the others. It is derived from the log alone (tombstones are
// added in the order expiry makes them), so live, replayed and restored
// projections hold the same bits.
type tombFilter struct {
	segs []tombSeg
}

type tombSeg struct {
	capacity uint64
	count    uint64
	bits     []uint64
}

const (
	tombBitsPerKey = 10
	tombHashes     = 7
	tombFirstCap   = 1 << 12
)

func newTombSeg(capacity uint64) tombSeg {
	return tombSeg{capacity: capacity, bits: make([]uint64, (capacity*tombBitsPerKey+63)/64)}
}

// positions calls fn with the bit positions of t (a SHA-256: its own
// bytes are the hashes) in a segment of m bits.
func tombPositions(t string, m uint64, fn func(bit uint64) bool) bool {
	h1 := binary.LittleEndian.Uint64([]byte(t[0:8]))
	h2 := binary.LittleEndian.Uint64([]byte(t[8:16])) | 1
	for i := range uint64(tombHashes) {
		if !fn((h1 + i*h2) % m) {
			return false
		}
	}
	return true
}

func (g *tombSeg) has(t string) bool {
	m := uint64(len(g.bits)) * 64
	return tombPositions(t, m, func(b uint64) bool { return g.bits[b/64]&(1<<(b%64)) != 0 })
}

func (g *tombSeg) add(t string) {
	m := uint64(len(g.bits)) * 64
	tombPositions(t, m, func(b uint64) bool { g.bits[b/64] |= 1 << (b % 64); return true })
	g.count++
}

// mayHave reports whether t may be a tombstone (false: it is not).
func (f *tombFilter) mayHave(t string) bool {
	for i := range f.segs {
		if f.segs[i].has(t) {
			return true
		}
	}
	return false
}

// add adds t unless the filter has it already (a key expired twice, which
// only a log no command writes holds).
func (f *tombFilter) add(t string) bool {
	if f.mayHave(t) {
		return false
	}
	if n := len(f.segs); n == 0 || f.segs[n-1].count >= f.segs[n-1].capacity {
		capacity := uint64(tombFirstCap)
		if n > 0 {
			capacity = f.segs[n-1].capacity * 2
		}
		f.segs = append(f.segs, newTombSeg(capacity))
	}
	f.segs[len(f.segs)-1].add(t)
	return true
}

func (f *tombFilter) empty() bool { return len(f.segs) == 0 }

// capture copies the newest segment (the only one that changes) and shares
// the others.
func (f *tombFilter) capture() tombFilter {
	if len(f.segs) == 0 {
		return tombFilter{}
	}
	segs := slices.Clone(f.segs)
	last := &segs[len(segs)-1]
	last.bits = slices.Clone(last.bits)
	return tombFilter{segs: segs}
}

func (f *tombFilter) encode() []byte {
	e := newEncBuf(16)
	e.uv(uint64(len(f.segs)))
	for _, g := range f.segs {
		e.uv(g.capacity)
		e.uv(g.count)
		for _, w := range g.bits {
			e.b = binary.LittleEndian.AppendUint64(e.b, w)
		}
	}
	return e.b
}

func (f *tombFilter) decode(sec string) error {
	d := &decBuf{s: sec}
	n := d.uv()
	if n > 64 {
		d.fail("tombstone filter segments")
		return d.err
	}
	want := uint64(tombFirstCap)
	for range n {
		capacity, count := d.uv(), d.uv()
		if capacity != want || count > capacity {
			d.fail("tombstone filter segment")
			return d.err
		}
		want *= 2
		g := tombSeg{capacity: capacity, count: count}
		words := (capacity*tombBitsPerKey + 63) / 64
		raw := d.raw(int(words * 8))
		if d.err != nil {
			return d.err
		}
		g.bits = make([]uint64, words)
		for i := range g.bits {
			g.bits[i] = binary.LittleEndian.Uint64([]byte(raw[i*8 : i*8+8]))
		}
		f.segs = append(f.segs, g)
	}
	if d.err == nil && d.p != len(d.s) {
		d.fail("trailing bytes after the tombstone filter")
	}
	return d.err
}
