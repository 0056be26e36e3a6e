package projections

import (
	"encoding/binary"
	"errors"
	"fmt"
	"slices"

	"taskledger/ledger"
)

// tombFilter is a compact filter of every tombstone the log made (a
// scalable Bloom filter): a lookup of a key that never expired — nearly
// every fresh key — is answered "no" from memory, and only the few it
// cannot rule out (about 0.8% per full segment) read the read model's
// tombstone index on disk. It holds 10 bits per tombstone (up to twice
// that in the newest segment's unused room) instead of the tombstones
// themselves. Segments
// double in capacity up to tombMaxCap, then keep that capacity; only the
// newest one changes, so a capture copies it and shares the others. It is
// derived from the log alone (tombstones are added in the order expiry
// makes them), so live, replayed and restored projections hold the same
// bits.
//
// A full segment never changes again: on projections with a read model
// it is written to the read model's filter bucket in the batch that
// fills it (RMFilter, in chunks of tombChunkBytes), and a snapshot of
// them holds only the segments not yet full (D464), so that its size
// does not grow with the history. A restored segment is read back from
// its rows when the projections attach the read model (UseFinished);
// until then, or if its rows cannot be read, its bits are nil and it
// rules nothing out (the index on disk decides).
type tombFilter struct {
	segs []tombSeg
}

type tombSeg struct {
	capacity uint64
	count    uint64
	bits     []uint64 // nil: a full segment not read back from its rows
}

const (
	tombBitsPerKey = 10
	tombHashes     = 7
	// tombChunkBytes is the size of a full segment's rows in the read model.
	tombChunkBytes = 64 << 10
)

// The segments' capacities (variables only so that tests reach several
// segments with few keys): the first holds tombFirstCap keys, each next
// one twice its predecessor's up to tombMaxCap (5.2 MB of bits), so the
// newest segment, the one a snapshot holds, never grows past it, at the
// cost of one segment more to probe per 4 Mi tombstones beyond 8 Mi.
var (
	tombFirstCap uint64 = 1 << 12
	tombMaxCap   uint64 = 1 << 22
)

// tombNextCap is the capacity of the segment after one of capacity prev
// (0: the first).
func tombNextCap(prev uint64) uint64 {
	if prev == 0 {
		return tombFirstCap
	}
	return min(prev*2, tombMaxCap)
}

func newTombSeg(capacity uint64) tombSeg {
	return tombSeg{capacity: capacity, bits: make([]uint64, tombWords(capacity))}
}

func tombWords(capacity uint64) uint64 { return (capacity*tombBitsPerKey + 63) / 64 }

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
	if g.bits == nil {
		return true // not read back: it rules nothing out
	}
	m := uint64(len(g.bits)) * 64
	return tombPositions(t, m, func(b uint64) bool { return g.bits[b/64]&(1<<(b%64)) != 0 })
}

func (g *tombSeg) add(t string) {
	m := uint64(len(g.bits)) * 64
	tombPositions(t, m, func(b uint64) bool { g.bits[b/64] |= 1 << (b % 64); return true })
	g.count++
}

func (g *tombSeg) full() bool { return g.count >= g.capacity }

// mayHave reports whether t may be a tombstone (false: it is not).
func (f *tombFilter) mayHave(t string) bool {
	for i := range f.segs {
		if f.segs[i].has(t) {
			return true
		}
	}
	return false
}

// add adds t to the newest segment (a new one when it is full) and
// returns the index of the segment it filled, or -1. A key expired twice
// (which only a log no command writes holds) is counted twice: what the
// filter holds never depends on what it held, so segments not read back
// cannot change it.
func (f *tombFilter) add(t string) int {
	if n := len(f.segs); n == 0 || f.segs[n-1].full() {
		var prev uint64
		if n > 0 {
			prev = f.segs[n-1].capacity
		}
		f.segs = append(f.segs, newTombSeg(tombNextCap(prev)))
	}
	last := len(f.segs) - 1
	f.segs[last].add(t)
	if f.segs[last].full() {
		return last
	}
	return -1
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

// fullSegs is how many segments are full (a prefix: only the newest may
// not be).
func (f *tombFilter) fullSegs() int {
	n := len(f.segs)
	if n > 0 && !f.segs[n-1].full() {
		n--
	}
	return n
}

// encode writes the filter: its segment count, how many leading full
// segments are left to the read model's rows (all full ones when
// onDisk, else none), then every other segment's capacity, count and
// bits.
func (f *tombFilter) encode(onDisk bool) ([]byte, error) {
	e := newEncBuf(16)
	disk := 0
	if onDisk {
		disk = f.fullSegs()
	}
	e.uv(uint64(len(f.segs)))
	e.uv(uint64(disk))
	for i, g := range f.segs[disk:] {
		if g.bits == nil {
			return nil, fmt.Errorf("%w: tombstone filter segment %d was not read back from the read model", ledger.ErrCorrupt, disk+i)
		}
		e.uv(g.capacity)
		e.uv(g.count)
		for _, w := range g.bits {
			e.b = binary.LittleEndian.AppendUint64(e.b, w)
		}
	}
	return e.b, e.err
}

func (f *tombFilter) decode(sec string) error {
	d := &decBuf{s: sec}
	n, disk := d.uv(), d.uv()
	if n > 1<<16 || disk > n {
		d.fail("tombstone filter segments")
		return d.err
	}
	var want uint64
	for i := range n {
		want = tombNextCap(want)
		if i < disk { // full, its bits in the read model's rows
			f.segs = append(f.segs, tombSeg{capacity: want, count: want})
			continue
		}
		capacity, count := d.uv(), d.uv()
		if capacity != want || count > capacity {
			d.fail("tombstone filter segment")
			return d.err
		}
		g := tombSeg{capacity: capacity, count: count}
		words := tombWords(capacity)
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

// segRows returns the read-model rows of full segment i: its bits, little
// endian, in chunks of tombChunkBytes keyed by segment and chunk index.
func (f *tombFilter) segRows(i int) []ledger.ReadModelWrite {
	g := &f.segs[i]
	var ws []ledger.ReadModelWrite
	const per = tombChunkBytes / 8
	for c := 0; c*per < len(g.bits); c++ {
		words := g.bits[c*per : min((c+1)*per, len(g.bits))]
		v := make([]byte, 0, 8*len(words))
		for _, w := range words {
			v = binary.LittleEndian.AppendUint64(v, w)
		}
		ws = append(ws, ledger.ReadModelWrite{Bucket: RMFilter, Key: tombChunkKey(i, c), Value: v})
	}
	return ws
}

func tombChunkKey(seg, chunk int) []byte {
	k := binary.BigEndian.AppendUint32(nil, uint32(seg))
	return binary.BigEndian.AppendUint32(k, uint32(chunk))
}

// readBack reads the bits of every full segment not read back yet from
// its rows in f, or takes them from ahead (nil: none) when it holds the
// segment at its size. A segment whose rows are missing or of the wrong
// size stays unread (it rules nothing out) and is reported.
func (f *tombFilter) readBack(rm FinishedStore, ahead *TombFilterRows) error {
	var first error
	for i := range f.segs {
		g := &f.segs[i]
		if g.bits != nil {
			continue
		}
		if ahead != nil && i < len(ahead.segs) && uint64(len(ahead.segs[i])) == tombWords(g.capacity) {
			g.bits = ahead.segs[i]
			continue
		}
		bits, err := readTombSeg(rm, i, g.capacity, nil)
		if err != nil {
			if first == nil {
				first = fmt.Errorf("tombstone filter segment %d: %w", i, err)
			}
			continue
		}
		g.bits = bits
	}
	return first
}

// errTombReadStopped ends a read ahead of the filter's rows that was
// called off.
var errTombReadStopped = errors.New("projections: the read of the tombstone filter's rows was called off")

// errTombNoRows is a segment whose first row is absent.
var errTombNoRows = fmt.Errorf("%w: the segment has no rows", ledger.ErrCorrupt)

// readTombSeg reads the bits of full segment seg of the given capacity
// from its rows; stop (nil: never) is asked between rows.
func readTombSeg(rm FinishedStore, seg int, capacity uint64, stop func() bool) ([]uint64, error) {
	n := int(tombWords(capacity))
	var bits []uint64 // made once the first row is there
	const per = tombChunkBytes / 8
	for c := 0; c*per < n; c++ {
		if stop != nil && stop() {
			return nil, errTombReadStopped
		}
		v, err := rm.ReadModelGet(RMFilter, tombChunkKey(seg, c))
		if err != nil {
			return nil, err
		}
		if c == 0 {
			if v == nil {
				return nil, errTombNoRows
			}
			bits = make([]uint64, n)
		}
		words := bits[c*per : min((c+1)*per, n)]
		if len(v) != 8*len(words) {
			return nil, fmt.Errorf("%w: row %d holds %d bytes, want %d", ledger.ErrCorrupt, c, len(v), 8*len(words))
		}
		for j := range words {
			words[j] = binary.LittleEndian.Uint64(v[8*j:])
		}
	}
	return bits, nil
}

// TombFilterRows is the bits of the tombstone filter's full segments as
// the read model's rows hold them, read before the projections they
// belong to are loaded (ReadTombFilterRows), so that a start reads them
// beside its other work instead of after it.
type TombFilterRows struct {
	segs [][]uint64
}

// Segments is how many segments were read.
func (r *TombFilterRows) Segments() int { return len(r.segs) }

// ReadTombFilterRows reads the rows of the full tombstone-filter segments
// in rm, in order, until the first segment without rows (the newest, not
// full, has none) or whose rows cannot be read, or until stop reports
// true (checked between rows). A segment's capacity depends only on its
// index, so no projections are needed to read them. What it returns is
// only as good as the read model it read: a start uses it once the read
// model proved current at the head, else it reads the segments again
// (UseFinishedWith).
func ReadTombFilterRows(rm FinishedStore, stop func() bool) (*TombFilterRows, error) {
	r := &TombFilterRows{}
	var capacity uint64
	for seg := 0; ; seg++ {
		capacity = tombNextCap(capacity)
		bits, err := readTombSeg(rm, seg, capacity, stop)
		if errors.Is(err, errTombNoRows) {
			return r, nil
		}
		if err != nil {
			return r, err
		}
		r.segs = append(r.segs, bits)
	}
}
