// Package mpread reads the msgpack that ledger.Marshal writes, by hand:
// maps, strings, binaries, integers, booleans, arrays, and any value
// skipped whole. Hot decoders (envelopes, event bodies) use it and leave
// whatever it does not handle to the generic msgpack decoder.
package mpread

import (
	"encoding/binary"
	"math"
)

// Reader reads msgpack from B starting at P. Every method reports false
// for what it does not handle (another type, a truncated value), which its
// callers leave to the generic decoder.
type Reader struct {
	B []byte
	P int
}

func (r *Reader) byte() (byte, bool) {
	if r.P >= len(r.B) {
		return 0, false
	}
	c := r.B[r.P]
	r.P++
	return c, true
}

// next returns the next n bytes.
func (r *Reader) Next(n int) ([]byte, bool) {
	if n < 0 || n > len(r.B)-r.P {
		return nil, false
	}
	s := r.B[r.P : r.P+n]
	r.P += n
	return s, true
}

// sized reads a 1, 2 or 4 byte big-endian length.
func (r *Reader) sized(w int) (int, bool) {
	s, ok := r.Next(w)
	if !ok {
		return 0, false
	}
	switch w {
	case 1:
		return int(s[0]), true
	case 2:
		return int(binary.BigEndian.Uint16(s)), true
	}
	v := binary.BigEndian.Uint32(s)
	if uint64(v) > math.MaxInt32 {
		return 0, false
	}
	return int(v), true
}

func (r *Reader) MapLen() (int, bool) {
	c, ok := r.byte()
	switch {
	case !ok:
		return 0, false
	case c >= 0x80 && c <= 0x8f:
		return int(c & 0x0f), true
	case c == 0xde:
		return r.sized(2)
	case c == 0xdf:
		return r.sized(4)
	}
	return 0, false
}

// strLen reads a string header: -1 for nil.
func (r *Reader) strLen() (int, bool) {
	c, ok := r.byte()
	switch {
	case !ok:
		return 0, false
	case c >= 0xa0 && c <= 0xbf:
		return int(c & 0x1f), true
	case c == 0xc0:
		return -1, true
	case c == 0xd9:
		return r.sized(1)
	case c == 0xda:
		return r.sized(2)
	case c == 0xdb:
		return r.sized(4)
	}
	return 0, false
}

// key reads a map key without copying it (switch string(key) does not
// allocate).
func (r *Reader) Key() ([]byte, bool) {
	n, ok := r.strLen()
	if !ok || n < 0 {
		return nil, false
	}
	return r.Next(n)
}

// StrBytes reads a string without copying it (nil reads as empty).
func (r *Reader) StrBytes() ([]byte, bool) {
	n, ok := r.strLen()
	if !ok || n < 0 {
		return nil, ok
	}
	return r.Next(n)
}

// Str reads a string (nil reads as "", as the generic decoder does).
func (r *Reader) Str() (string, bool) {
	n, ok := r.strLen()
	if !ok || n < 0 {
		return "", ok
	}
	s, ok := r.Next(n)
	return string(s), ok
}

// bin reads binary data as msgpack does: nil for nil, a copy otherwise
// (empty, not nil, for length 0).
func (r *Reader) Bin() ([]byte, bool) {
	s, ok := r.BinBytes()
	if !ok || s == nil {
		return nil, ok
	}
	return append(make([]byte, 0, len(s)), s...), true
}

// BinBytes reads binary data as Bin does, without copying it: nil for
// nil, else a slice of the buffer (its capacity ends with it).
func (r *Reader) BinBytes() ([]byte, bool) {
	c, ok := r.byte()
	if !ok {
		return nil, false
	}
	var n int
	switch c {
	case 0xc0:
		return nil, true
	case 0xc4:
		n, ok = r.sized(1)
	case 0xc5:
		n, ok = r.sized(2)
	case 0xc6:
		n, ok = r.sized(4)
	default:
		return nil, false
	}
	if !ok {
		return nil, false
	}
	s, ok := r.Next(n)
	if !ok {
		return nil, false
	}
	return s[:n:n], true
}

// uint reads any integer (or nil, as 0) as its 64-bit pattern, as the
// generic decoder converts it into an integer field.
func (r *Reader) Uint() (uint64, bool) {
	c, ok := r.byte()
	if !ok {
		return 0, false
	}
	switch {
	case c <= 0x7f:
		return uint64(c), true
	case c >= 0xe0:
		return uint64(int64(int8(c))), true
	case c == 0xc0:
		return 0, true
	}
	var w int
	switch c {
	case 0xcc, 0xd0:
		w = 1
	case 0xcd, 0xd1:
		w = 2
	case 0xce, 0xd2:
		w = 4
	case 0xcf, 0xd3:
		w = 8
	default:
		return 0, false
	}
	s, ok := r.Next(w)
	if !ok {
		return 0, false
	}
	var u uint64
	switch w {
	case 1:
		u = uint64(s[0])
		if c == 0xd0 {
			u = uint64(int64(int8(s[0])))
		}
	case 2:
		u = uint64(binary.BigEndian.Uint16(s))
		if c == 0xd1 {
			u = uint64(int64(int16(u)))
		}
	case 4:
		u = uint64(binary.BigEndian.Uint32(s))
		if c == 0xd2 {
			u = uint64(int64(int32(u)))
		}
	case 8:
		u = binary.BigEndian.Uint64(s)
	}
	return u, true
}

// skip moves past one value of any type (the body is kept raw).
func (r *Reader) Skip(depth int) bool {
	if depth > 64 {
		return false
	}
	c, ok := r.byte()
	if !ok {
		return false
	}
	var n, items int
	switch {
	case c <= 0x7f || c >= 0xe0 || c == 0xc0 || c == 0xc2 || c == 0xc3:
		return true
	case c >= 0xa0 && c <= 0xbf:
		n = int(c & 0x1f)
	case c >= 0x90 && c <= 0x9f:
		items = int(c & 0x0f)
	case c >= 0x80 && c <= 0x8f:
		items = 2 * int(c&0x0f)
	default:
		switch c {
		case 0xcc, 0xd0:
			n = 1
		case 0xcd, 0xd1:
			n = 2
		case 0xce, 0xd2, 0xca:
			n = 4
		case 0xcf, 0xd3, 0xcb:
			n = 8
		case 0xc4, 0xd9:
			n, ok = r.sized(1)
		case 0xc5, 0xda:
			n, ok = r.sized(2)
		case 0xc6, 0xdb:
			n, ok = r.sized(4)
		case 0xdc:
			items, ok = r.sized(2)
		case 0xdd:
			items, ok = r.sized(4)
		case 0xde:
			items, ok = r.sized(2)
			items *= 2
		case 0xdf:
			items, ok = r.sized(4)
			items *= 2
		default:
			return false // extensions and the unused code: generic decoder
		}
	}
	if !ok {
		return false
	}
	if _, ok := r.Next(n); !ok {
		return false
	}
	for range items {
		if !r.Skip(depth + 1) {
			return false
		}
	}
	return true
}

// Nil reports whether the next value is nil, and moves past it if so.
func (r *Reader) Nil() bool {
	if r.P < len(r.B) && r.B[r.P] == 0xc0 {
		r.P++
		return true
	}
	return false
}

// PeekNil reports whether the next value is nil without moving.
func (r *Reader) PeekNil() bool { return r.P < len(r.B) && r.B[r.P] == 0xc0 }

// Bool reads a boolean (nil reads as false, as the generic decoder does).
func (r *Reader) Bool() (bool, bool) {
	c, ok := r.byte()
	switch {
	case !ok:
		return false, false
	case c == 0xc3:
		return true, true
	case c == 0xc2 || c == 0xc0:
		return false, true
	}
	return false, false
}

// ArrayLen reads an array header: -1 for nil.
func (r *Reader) ArrayLen() (int, bool) {
	c, ok := r.byte()
	switch {
	case !ok:
		return 0, false
	case c >= 0x90 && c <= 0x9f:
		return int(c & 0x0f), true
	case c == 0xc0:
		return -1, true
	case c == 0xdc:
		return r.sized(2)
	case c == 0xdd:
		return r.sized(4)
	}
	return 0, false
}
