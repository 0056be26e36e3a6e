// Package mpwrite appends msgpack exactly as ledger.Marshal writes it
// (github.com/vmihailenco/msgpack/v5 with compact integers and sorted map
// keys): the hot encoders of the write path (envelopes, event bodies) use
// it instead of the reflection-based encoder. Byte-for-byte equality with
// ledger.Marshal is what the tests of its users check.
package mpwrite

import (
	"math"
	"slices"
)

// msgpack format bytes.
const (
	fixMap   = 0x80
	fixArray = 0x90
	fixStr   = 0xa0
	cNil     = 0xc0
	cFalse   = 0xc2
	cTrue    = 0xc3
	bin8     = 0xc4
	bin16    = 0xc5
	bin32    = 0xc6
	uint8c   = 0xcc
	uint16c  = 0xcd
	uint32c  = 0xce
	uint64c  = 0xcf
	int8c    = 0xd0
	int16c   = 0xd1
	int32c   = 0xd2
	int64c   = 0xd3
	str8     = 0xd9
	str16    = 0xda
	str32    = 0xdb
	array16  = 0xdc
	array32  = 0xdd
	map16    = 0xde
	map32    = 0xdf
)

func be16(b []byte, v uint16) []byte { return append(b, byte(v>>8), byte(v)) }
func be32(b []byte, v uint32) []byte {
	return append(b, byte(v>>24), byte(v>>16), byte(v>>8), byte(v))
}
func be64(b []byte, v uint64) []byte { return be32(be32(b, uint32(v>>32)), uint32(v)) }

// Nil appends nil.
func Nil(b []byte) []byte { return append(b, cNil) }

// Bool appends a boolean.
func Bool(b []byte, v bool) []byte {
	if v {
		return append(b, cTrue)
	}
	return append(b, cFalse)
}

// MapLen appends a map header of n entries.
func MapLen(b []byte, n int) []byte {
	switch {
	case n < 16:
		return append(b, fixMap|byte(n))
	case n <= math.MaxUint16:
		return be16(append(b, map16), uint16(n))
	}
	return be32(append(b, map32), uint32(n))
}

// ArrayLen appends an array header of n elements.
func ArrayLen(b []byte, n int) []byte {
	switch {
	case n < 16:
		return append(b, fixArray|byte(n))
	case n <= math.MaxUint16:
		return be16(append(b, array16), uint16(n))
	}
	return be32(append(b, array32), uint32(n))
}

// String appends a string.
func String(b []byte, s string) []byte {
	n := len(s)
	switch {
	case n < 32:
		b = append(b, fixStr|byte(n))
	case n < 256:
		b = append(b, str8, byte(n))
	case n <= math.MaxUint16:
		b = be16(append(b, str16), uint16(n))
	default:
		b = be32(append(b, str32), uint32(n))
	}
	return append(b, s...)
}

// Bin appends a byte slice (nil as nil).
func Bin(b []byte, v []byte) []byte {
	if v == nil {
		return Nil(b)
	}
	n := len(v)
	switch {
	case n < 256:
		b = append(b, bin8, byte(n))
	case n <= math.MaxUint16:
		b = be16(append(b, bin16), uint16(n))
	default:
		b = be32(append(b, bin32), uint32(n))
	}
	return append(b, v...)
}

// Uint appends an unsigned integer in the fewest bytes.
func Uint(b []byte, v uint64) []byte {
	switch {
	case v <= math.MaxInt8:
		return append(b, byte(v))
	case v <= math.MaxUint8:
		return append(b, uint8c, byte(v))
	case v <= math.MaxUint16:
		return be16(append(b, uint16c), uint16(v))
	case v <= math.MaxUint32:
		return be32(append(b, uint32c), uint32(v))
	}
	return be64(append(b, uint64c), v)
}

// Int appends a signed integer in the fewest bytes.
func Int(b []byte, v int64) []byte {
	switch {
	case v >= 0:
		return Uint(b, uint64(v))
	case v >= -32:
		return append(b, byte(v))
	case v >= math.MinInt8:
		return append(b, int8c, byte(v))
	case v >= math.MinInt16:
		return be16(append(b, int16c), uint16(v))
	case v >= math.MinInt32:
		return be32(append(b, int32c), uint32(v))
	}
	return be64(append(b, int64c), uint64(v))
}

// Strings appends a string slice (nil as nil).
func Strings(b []byte, s []string) []byte {
	if s == nil {
		return Nil(b)
	}
	b = ArrayLen(b, len(s))
	for _, v := range s {
		b = String(b, v)
	}
	return b
}

// MapStringBool appends a map with its keys sorted (nil as nil).
func MapStringBool(b []byte, m map[string]bool) []byte {
	if m == nil {
		return Nil(b)
	}
	b = MapLen(b, len(m))
	var small [16]string
	keys := small[:0]
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	for _, k := range keys {
		b = Bool(String(b, k), m[k])
	}
	return b
}
