package mpwrite_test

import (
	"bytes"
	"math"
	"strings"
	"testing"

	"taskledger/internal/msgpack/mpwrite"
	"taskledger/ledger"
)

func same(t *testing.T, what string, got []byte, v any) {
	t.Helper()
	want, err := ledger.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, want) {
		t.Fatalf("%s: wrote %x, ledger.Marshal writes %x", what, got, want)
	}
}

// TestPrimitivesMatchMarshal checks every primitive at the boundaries
// where msgpack changes representation.
func TestPrimitivesMatchMarshal(t *testing.T) {
	for _, v := range []uint64{0, 1, 127, 128, 255, 256, 65535, 65536, math.MaxUint32, math.MaxUint32 + 1, math.MaxUint64} {
		same(t, "uint", mpwrite.Uint(nil, v), v)
	}
	for _, v := range []int64{0, 1, 127, 128, 255, 256, 65535, 65536, math.MaxUint32, math.MaxUint32 + 1, math.MaxInt64,
		-1, -32, -33, -128, -129, -32768, -32769, math.MinInt32, math.MinInt32 - 1, math.MinInt64} {
		same(t, "int", mpwrite.Int(nil, v), v)
	}
	for _, n := range []int{0, 1, 31, 32, 255, 256, 65535, 65536} {
		s := strings.Repeat("a", n)
		same(t, "string", mpwrite.String(nil, s), s)
		b := bytes.Repeat([]byte{1}, n)
		same(t, "bin", mpwrite.Bin(nil, b), b)
		ss := make([]string, n%300)
		same(t, "strings", mpwrite.Strings(nil, ss), ss)
	}
	same(t, "nil bin", mpwrite.Bin(nil, nil), []byte(nil))
	same(t, "nil strings", mpwrite.Strings(nil, nil), []string(nil))
	same(t, "nil map", mpwrite.MapStringBool(nil, nil), map[string]bool(nil))
	for _, n := range []int{0, 1, 15, 16, 17, 40} {
		m := map[string]bool{}
		for i := range n {
			m[strings.Repeat("k", i+1)] = i%2 == 0
		}
		same(t, "map", mpwrite.MapStringBool(nil, m), m)
	}
	same(t, "true", mpwrite.Bool(nil, true), true)
	same(t, "false", mpwrite.Bool(nil, false), false)
	same(t, "nil", mpwrite.Nil(nil), nil)
	for _, n := range []int{0, 15, 16, 65535, 65536} {
		if got, want := mpwrite.MapLen(nil, n), mapHeader(t, n); !bytes.Equal(got, want) {
			t.Fatalf("map header %d: %x, want %x", n, got, want)
		}
		if got, want := mpwrite.ArrayLen(nil, n), arrayHeader(t, n); !bytes.Equal(got, want) {
			t.Fatalf("array header %d: %x, want %x", n, got, want)
		}
	}
}

// mapHeader is the header ledger.Marshal writes for a map of n entries.
func mapHeader(t *testing.T, n int) []byte {
	m := make(map[uint32]bool, n)
	for i := range n {
		m[uint32(i)] = true
	}
	b, err := ledger.Marshal(m)
	if err != nil {
		t.Fatal(err)
	}
	return b[:len(b)-entriesLen(n)]
}

// entriesLen is the size of n entries uint32(i) → true as Marshal writes them.
func entriesLen(n int) int {
	size := 0
	for i := range n {
		size += len(mpwrite.Uint(nil, uint64(i))) + 1
	}
	return size
}

// arrayHeader is the header ledger.Marshal writes for n booleans.
func arrayHeader(t *testing.T, n int) []byte {
	b, err := ledger.Marshal(make([]bool, n))
	if err != nil {
		t.Fatal(err)
	}
	return b[:len(b)-n]
}
