package merkle_test

import (
	"bytes"
	"errors"
	"fmt"
	"math/rand/v2"
	"testing"

	"github.com/transparency-dev/merkle/rfc6962"
	"github.com/transparency-dev/merkle/testonly"

	"taskledger/audit/merkle"
)

func leaves(n int, r *rand.Rand) [][]byte {
	out := make([][]byte, n)
	for i := range out {
		b := make([]byte, 20+r.IntN(300))
		for j := range b {
			b[j] = byte(r.Uint32())
		}
		out[i] = b
	}
	return out
}

// grow builds the tree in batches of random sizes, as commits do.
func grow(t testing.TB, raws [][]byte, r *rand.Rand) *merkle.Tree {
	tr := merkle.New()
	for i := 0; i < len(raws); {
		n := 1 + r.IntN(9)
		if i+n > len(raws) {
			n = len(raws) - i
		}
		if err := tr.Append(uint64(i)+1, raws[i:i+n]); err != nil {
			t.Fatal(err)
		}
		i += n
	}
	return tr
}

// TestRootsMatchTheReferenceTree compares every root of every size with
// the library's reference implementation.
func TestRootsMatchTheReferenceTree(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	raws := leaves(300, r)
	tr := grow(t, raws, r)
	ref := testonly.New(rfc6962.DefaultHasher)
	ref.AppendData(raws...)
	for size := uint64(0); size <= 300; size++ {
		got, err := tr.Root(size)
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(got, ref.HashAt(size)) {
			t.Fatalf("root of size %d differs from the reference", size)
		}
	}
}

// TestInclusionProofsVerifyForRandomSizes: for random tree sizes and
// leaves, the proof verifies with the library's verifier, equals the
// reference tree's proof, and fails for another leaf, index or root.
func TestInclusionProofsVerifyForRandomSizes(t *testing.T) {
	r := rand.New(rand.NewPCG(3, 4))
	raws := leaves(1100, r)
	tr := grow(t, raws, r)
	ref := testonly.New(rfc6962.DefaultHasher)
	ref.AppendData(raws...)
	for range 400 {
		size := 1 + r.Uint64N(uint64(len(raws)))
		seq := 1 + r.Uint64N(size)
		p, err := tr.Inclusion(seq-1, size)
		if err != nil {
			t.Fatal(err)
		}
		want, _ := ref.InclusionProof(seq-1, size)
		if fmt.Sprint(p) != fmt.Sprint(want) {
			t.Fatalf("proof of seq %d in %d differs from the reference", seq, size)
		}
		root, _ := tr.Root(size)
		leaf := merkle.LeafHash(raws[seq-1])
		if err := merkle.VerifyInclusion(seq, size, leaf, p, root); err != nil {
			t.Fatalf("seq %d size %d: %v", seq, size, err)
		}
		if err := merkle.VerifyInclusion(seq, size, merkle.LeafHash(append([]byte{1}, raws[seq-1]...)), p, root); err == nil {
			t.Fatalf("seq %d size %d: another leaf verified", seq, size)
		}
		if size > 1 {
			other := seq%size + 1
			if err := merkle.VerifyInclusion(other, size, leaf, p, root); err == nil && !bytes.Equal(raws[other-1], raws[seq-1]) {
				t.Fatalf("seq %d size %d: verified at seq %d", seq, size, other)
			}
		}
	}
}

// TestConsistencyProofsVerifyForRandomSizes: for random pairs of sizes the
// proof verifies with the library's verifier, equals the reference, and
// fails against another root.
func TestConsistencyProofsVerifyForRandomSizes(t *testing.T) {
	r := rand.New(rand.NewPCG(5, 6))
	raws := leaves(1100, r)
	tr := grow(t, raws, r)
	ref := testonly.New(rfc6962.DefaultHasher)
	ref.AppendData(raws...)
	for range 400 {
		to := 1 + r.Uint64N(uint64(len(raws)))
		from := 1 + r.Uint64N(to)
		p, err := tr.Consistency(from, to)
		if err != nil {
			t.Fatal(err)
		}
		want, _ := ref.ConsistencyProof(from, to)
		if fmt.Sprint(p) != fmt.Sprint(want) {
			t.Fatalf("proof %d→%d differs from the reference", from, to)
		}
		r1, _ := tr.Root(from)
		r2, _ := tr.Root(to)
		if err := merkle.VerifyConsistency(from, to, p, r1, r2); err != nil {
			t.Fatalf("%d→%d: %v", from, to, err)
		}
		if from < to {
			bad := append([]byte(nil), r1...)
			bad[0] ^= 1
			if err := merkle.VerifyConsistency(from, to, p, bad, r2); err == nil {
				t.Fatalf("%d→%d: verified against a forged old root", from, to)
			}
		}
	}
}

func TestTreeRefusesBadRequests(t *testing.T) {
	tr := merkle.New()
	r := rand.New(rand.NewPCG(7, 8))
	if err := tr.Append(1, leaves(10, r)); err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		name string
		err  error
		want error
	}{
		{"append gap", tr.Append(12, leaves(1, r)), merkle.ErrOrder},
		{"append again", tr.Append(10, leaves(1, r)), merkle.ErrOrder},
		{"root beyond", func() error { _, err := tr.Root(11); return err }(), merkle.ErrSize},
		{"inclusion size beyond", func() error { _, err := tr.Inclusion(0, 11); return err }(), merkle.ErrSize},
		{"inclusion index at size", func() error { _, err := tr.Inclusion(5, 5); return err }(), merkle.ErrIndex},
		{"consistency beyond", func() error { _, err := tr.Consistency(1, 11); return err }(), merkle.ErrSize},
		{"consistency reversed", func() error { _, err := tr.Consistency(6, 5); return err }(), merkle.ErrRange},
		{"leaf beyond", func() error { _, err := tr.LeafHashAt(10); return err }(), merkle.ErrIndex},
	}
	for _, c := range cases {
		if !errors.Is(c.err, c.want) {
			t.Errorf("%s: got %v, want %v", c.name, c.err, c.want)
		}
	}
	if tr.Size() != 10 {
		t.Fatalf("refused appends changed the tree: size %d", tr.Size())
	}
}

func TestTreesOfTheSameLeavesAreEqual(t *testing.T) {
	r := rand.New(rand.NewPCG(9, 10))
	raws := leaves(77, r)
	a, b := grow(t, raws, r), grow(t, raws, r)
	if !a.Equal(b) {
		t.Fatal("the same leaves in other batches gave another tree")
	}
	c := grow(t, raws[:76], r)
	if a.Equal(c) {
		t.Fatal("trees of other sizes compare equal")
	}
	raws[40] = append(raws[40], 0)
	if a.Equal(grow(t, raws, r)) {
		t.Fatal("trees of other leaves compare equal")
	}
}

// BenchmarkAppendPerEvent is the tree's cost per committed event: the leaf
// hash of a typical envelope (about 300 bytes) and the nodes it completes,
// appended in batches of 64 as the committer does. Target: ≤ 2 µs/event.
func BenchmarkAppendPerEvent(b *testing.B) {
	r := rand.New(rand.NewPCG(11, 12))
	batch := make([][]byte, 64)
	for i := range batch {
		batch[i] = make([]byte, 300)
		for j := range batch[i] {
			batch[i][j] = byte(r.Uint32())
		}
	}
	tr := merkle.New()
	b.ReportAllocs()
	b.ResetTimer()
	seq := uint64(1)
	for i := 0; i < b.N; i += len(batch) {
		n := min(len(batch), b.N-i)
		if err := tr.Append(seq, batch[:n]); err != nil {
			b.Fatal(err)
		}
		seq += uint64(n)
	}
}

func TestRootHasherGivesTheTreesRoot(t *testing.T) {
	tr, h := merkle.New(), merkle.NewRootHasher()
	for i := uint64(1); i <= 37; i++ {
		raw := []byte{byte(i), byte(i >> 8), 7}
		if err := tr.Append(i, [][]byte{raw}); err != nil {
			t.Fatal(err)
		}
		if err := h.Add(raw); err != nil {
			t.Fatal(err)
		}
		want, _ := tr.Root(i)
		got, err := h.Root()
		if err != nil || !bytes.Equal(got, want) {
			t.Fatalf("size %d: root %x, tree %x (%v)", i, got, want, err)
		}
	}
	if r, _ := merkle.NewRootHasher().Root(); !bytes.Equal(r, merkle.EmptyRoot()) {
		t.Fatalf("empty root %x", r)
	}
}
