package projections

import (
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"runtime"
	"strings"

	"github.com/google/uuid"
)

// The primitives of the content encoding (content.go): unsigned and
// zigzag varints, length-prefixed strings, times as deltas, and strings
// interned per section.

// encBuf appends the content encoding to b.
type encBuf struct {
	b      []byte
	intern map[string]uint64
	err    error
}

func newEncBuf(size int) *encBuf {
	return &encBuf{b: make([]byte, 0, size), intern: map[string]uint64{}}
}

func (e *encBuf) uv(v uint64) { e.b = binary.AppendUvarint(e.b, v) }
func (e *encBuf) sv(v int64)  { e.b = binary.AppendVarint(e.b, v) }

func (e *encBuf) flag(v bool) {
	if v {
		e.b = append(e.b, 1)
	} else {
		e.b = append(e.b, 0)
	}
}

func (e *encBuf) str(s string) {
	e.uv(uint64(len(s)))
	e.b = append(e.b, s...)
}

// bytes writes nil as 0 and any other slice as its length + 1, so nil and
// empty stay apart.
func (e *encBuf) bytes(p []byte) {
	if p == nil {
		e.uv(0)
		return
	}
	e.uv(uint64(len(p)) + 1)
	e.b = append(e.b, p...)
}

// count writes the length of a slice, nil as 0 and any other as len + 1.
func (e *encBuf) count(n int, isNil bool) {
	if isNil {
		e.uv(0)
		return
	}
	e.uv(uint64(n) + 1)
}

// istr writes a string that repeats (states, device ids, event types):
// its index in the section's table + 1, or 0 and the string the first
// time.
func (e *encBuf) istr(s string) {
	if i, ok := e.intern[s]; ok {
		e.uv(i + 1)
		return
	}
	e.uv(0)
	e.str(s)
	e.intern[s] = uint64(len(e.intern))
}

// tm writes a time (Unix ms) relative to base: 0 for the zero time, else
// the zigzag of v - base, + 1.
func (e *encBuf) tm(base, v int64) {
	if v == 0 {
		e.uv(0)
		return
	}
	d := uint64(v-base)<<1 ^ uint64((v-base)>>63)
	if d == math.MaxUint64 {
		e.fail("time %d too far from %d", v, base)
		return
	}
	e.uv(d + 1)
}

func (e *encBuf) fail(format string, args ...any) {
	if e.err == nil {
		e.err = fmt.Errorf("projections: encode: "+format, args...)
	}
}

// errContent is what decoding reports for bytes that are not content this
// build wrote.
var errContent = errors.New("not projection content")

// decBuf reads the content encoding from s. Every string it returns is a
// substring of s (no copy). After the first error every read returns a
// zero value and err stays set.
type decBuf struct {
	s     string
	p     int
	err   error
	tab   []string
	arena []byte
}

func (d *decBuf) fail(what string) {
	if d.err == nil {
		d.err = fmt.Errorf("%w: %s at offset %d", errContent, what, d.p)
	}
	d.p = len(d.s)
}

func (d *decBuf) uv() uint64 {
	if d.p < len(d.s) {
		if c := d.s[d.p]; c < 0x80 {
			d.p++
			return uint64(c)
		}
	}
	var v uint64
	for shift := uint(0); shift < 64; shift += 7 {
		if d.p >= len(d.s) {
			d.fail("truncated varint")
			return 0
		}
		c := d.s[d.p]
		d.p++
		if c < 0x80 {
			if shift == 63 && c > 1 {
				break
			}
			return v | uint64(c)<<shift
		}
		v |= uint64(c&0x7f) << shift
	}
	d.fail("varint overflows")
	return 0
}

func (d *decBuf) sv() int64 {
	u := d.uv()
	return int64(u>>1) ^ -int64(u&1)
}

func (d *decBuf) flag() bool {
	if d.p >= len(d.s) {
		d.fail("truncated")
		return false
	}
	c := d.s[d.p]
	d.p++
	if c > 1 {
		d.fail("bad flag")
	}
	return c == 1
}

func (d *decBuf) str() string {
	n := d.uv()
	if n > uint64(len(d.s)-d.p) {
		d.fail("string beyond the end")
		return ""
	}
	s := d.s[d.p : d.p+int(n)]
	d.p += int(n)
	return s
}

// raw returns the next n bytes as a substring.
func (d *decBuf) raw(n int) string {
	if n < 0 || n > len(d.s)-d.p {
		d.fail("beyond the end")
		return ""
	}
	s := d.s[d.p : d.p+n]
	d.p += n
	return s
}

// bytes returns a byte slice written by encBuf.bytes, copied into an
// arena shared by the section (capacity capped: appending never writes
// into a neighbour).
func (d *decBuf) bytes() []byte {
	n := d.uv()
	if n == 0 {
		return nil
	}
	n--
	if n > uint64(len(d.s)-d.p) {
		d.fail("bytes beyond the end")
		return nil
	}
	k := int(n)
	if len(d.arena) < k {
		d.arena = make([]byte, max(k, 1<<16))
	}
	b := d.arena[:k:k]
	d.arena = d.arena[k:]
	copy(b, d.s[d.p:d.p+k])
	d.p += k
	return b
}

// count reads a slice length written by encBuf.count: -1 for nil. A length
// is never more than the bytes left (every element takes at least one).
func (d *decBuf) count() int {
	n := d.uv()
	if n == 0 {
		return -1
	}
	n--
	if n > uint64(len(d.s)-d.p) {
		d.fail("count beyond the end")
		return -1
	}
	return int(n)
}

// n reads a number of elements (written with uv): never more than the
// bytes left, as every element takes at least one.
func (d *decBuf) n() int {
	n := d.uv()
	if n > uint64(len(d.s)-d.p) {
		d.fail("count beyond the end")
		return 0
	}
	return int(n)
}

func (d *decBuf) istr() string {
	i := d.uv()
	if i == 0 {
		s := d.str()
		if d.err == nil {
			d.tab = append(d.tab, s)
		}
		return s
	}
	if i > uint64(len(d.tab)) {
		d.fail("unknown interned string")
		return ""
	}
	return d.tab[i-1]
}

func (d *decBuf) tm(base int64) int64 {
	u := d.uv()
	if u == 0 {
		return 0
	}
	u--
	return base + (int64(u>>1) ^ -int64(u&1))
}

// slab hands out pointers into chunks of T, so many small values cost a
// few allocations. A chunk lives as long as any of its values.
type slab[T any] struct{ buf []T }

const slabChunk = 1024

func (s *slab[T]) next() *T {
	if len(s.buf) == 0 {
		s.buf = make([]T, slabChunk)
	}
	p := &s.buf[0]
	s.buf = s.buf[1:]
	return p
}

// yieldEvery lets the other goroutines run every 1,024 items of a long
// encoding loop. A snapshot is encoded while the sequencer and the
// committer work on the same few cores; yielding often keeps them from
// waiting a whole preemption slice (10 ms) behind it. The snapshot takes
// a little longer; the commands it would have held up do not.
func yieldEvery(i int) {
	if i&1023 == 1023 {
		runtime.Gosched()
	}
}

// ustr writes a string that is usually a UUID (task, execution, session
// and authorization ids): a canonical UUID (lowercase, hyphenated, as
// uuid.String writes it) as 0 and its 16 bytes, any other string as its
// length + 1 and its bytes. Decoding gives back the same string either way.
func (e *encBuf) ustr(s string) {
	if u, ok := uuidBytes(s); ok {
		e.uv(0)
		e.b = append(e.b, u[:]...)
		return
	}
	e.uv(uint64(len(s)) + 1)
	e.b = append(e.b, s...)
}

// ustr reads a string written by encBuf.ustr. A UUID is a new string (the
// only strings decoding allocates); skipUstr passes over one instead.
func (d *decBuf) ustr() string {
	n := d.uv()
	if n > 0 {
		return d.raw(int(min(n-1, uint64(len(d.s)+1))))
	}
	u := d.raw(16)
	if d.err != nil {
		return ""
	}
	return uuidString(u)
}

func (d *decBuf) skipUstr() {
	if n := d.uv(); n > 0 {
		d.raw(int(min(n-1, uint64(len(d.s)+1))))
	} else {
		d.raw(16)
	}
}

// uuidBytes returns the 16 bytes of s when s is a canonical UUID: 36
// characters, hyphens at 8, 13, 18 and 23, lowercase hex digits elsewhere
// (so that uuidString gives s back exactly; uuid.Parse takes uppercase
// too).
func uuidBytes(s string) (uuid.UUID, bool) {
	if len(s) != 36 || strings.ContainsAny(s, "ABCDEF") {
		return uuid.UUID{}, false
	}
	u, err := uuid.Parse(s)
	return u, err == nil
}

// uuidString writes 16 bytes as a canonical UUID.
func uuidString(b string) string {
	var u uuid.UUID
	copy(u[:], b)
	return u.String()
}
