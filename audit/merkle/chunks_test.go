package merkle

import (
	"bytes"
	"math/rand/v2"
	"testing"

	"github.com/transparency-dev/merkle/rfc6962"
	"github.com/transparency-dev/merkle/testonly"
)

// TestStoredHashesAreNeverCopied: appending leaves never moves the hashes
// a full chunk holds (an append's cost does not grow with the tree), and
// the roots and proofs across chunk boundaries match the reference tree.
func TestStoredHashesAreNeverCopied(t *testing.T) {
	defer func(n int) { chunkHashes = n }(chunkHashes)
	chunkHashes = 4
	r := rand.New(rand.NewPCG(21, 22))
	raws := make([][]byte, 203)
	for i := range raws {
		raws[i] = []byte{byte(i), byte(i >> 8), byte(r.Uint32())}
	}
	tr := New()
	var firstFull *byte
	for i := 0; i < len(raws); i += 3 {
		n := min(3, len(raws)-i)
		if err := tr.Append(uint64(i)+1, raws[i:i+n]); err != nil {
			t.Fatal(err)
		}
		if l0 := tr.levels[0]; firstFull == nil && len(l0) > 1 {
			firstFull = &l0[1][0] // the first chunk allocated whole
		}
	}
	if got := &tr.levels[0][1][0]; got != firstFull {
		t.Fatal("a full chunk of stored hashes moved while leaves were appended")
	}
	ref := testonly.New(rfc6962.DefaultHasher)
	ref.AppendData(raws...)
	for size := uint64(0); size <= uint64(len(raws)); size++ {
		got, err := tr.Root(size)
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(got, ref.HashAt(size)) {
			t.Fatalf("root of size %d differs from the reference", size)
		}
	}
	for _, c := range [][2]uint64{{0, 203}, {5, 9}, {17, 200}, {131, 160}} {
		p, err := tr.Inclusion(c[0], c[1])
		if err != nil {
			t.Fatal(err)
		}
		want, err := ref.InclusionProof(c[0], c[1])
		if err != nil {
			t.Fatal(err)
		}
		if len(p) != len(want) {
			t.Fatalf("inclusion %v: %d hashes, reference %d", c, len(p), len(want))
		}
		for i := range p {
			if !bytes.Equal(p[i], want[i]) {
				t.Fatalf("inclusion %v differs from the reference", c)
			}
		}
	}
}
