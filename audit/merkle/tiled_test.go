package merkle_test

import (
	"bytes"
	"errors"
	"fmt"
	"math/rand/v2"
	"runtime"
	"sync"
	"testing"

	"github.com/transparency-dev/merkle/rfc6962"
	"github.com/transparency-dev/merkle/testonly"

	"taskledger/audit/merkle"
)

// leafSource is a merkle.LeafSource over leaf bytes kept by the test.
type leafSource struct {
	raws  [][]byte
	mu    sync.Mutex
	reads int
}

func (s *leafSource) LeafHashes(from, to uint64, out [][merkle.HashSize]byte) error {
	s.mu.Lock()
	s.reads++
	s.mu.Unlock()
	if to > uint64(len(s.raws)) {
		return fmt.Errorf("source holds %d leaves, asked up to %d", len(s.raws), to)
	}
	for i := from; i < to; i++ {
		copy(out[i-from][:], merkle.LeafHash(s.raws[i]))
	}
	return nil
}

// load builds a tree by Load from raws.
func load(t testing.TB, tr *merkle.Tree, raws [][]byte) *merkle.Tree {
	t.Helper()
	err := tr.Load(func(emit func([]byte) error) error {
		for _, r := range raws {
			if err := emit(r); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return tr
}

// growTiled builds a tiled tree in batches of random sizes, as commits do.
func growTiled(t testing.TB, height uint, raws [][]byte, r *rand.Rand) *merkle.Tree {
	tr := merkle.NewTiled(height, &leafSource{raws: raws})
	for i := 0; i < len(raws); {
		n := min(1+r.IntN(9), len(raws)-i)
		if err := tr.Append(uint64(i)+1, raws[i:i+n]); err != nil {
			t.Fatal(err)
		}
		i += n
	}
	return tr
}

func sameHashes(a, b [][]byte) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if !bytes.Equal(a[i], b[i]) {
			return false
		}
	}
	return true
}

// TestTiledTreeAnswersAsTheReferenceTree: a tree that keeps only the
// nodes above its tiles gives byte for byte the reference tree's roots,
// leaf hashes, inclusion and consistency proofs, for every size across
// tile boundaries, sizes 0 and 1, and pairs of sizes inside one tile and
// across tiles, whether it grew by appends or by Load.
func TestTiledTreeAnswersAsTheReferenceTree(t *testing.T) {
	r := rand.New(rand.NewPCG(31, 32))
	raws := leaves(1100, r)
	ref := testonly.New(rfc6962.DefaultHasher)
	ref.AppendData(raws...)
	for _, height := range []uint{1, 3, 8} {
		for _, how := range []string{"append", "load"} {
			t.Run(fmt.Sprintf("height %d by %s", height, how), func(t *testing.T) {
				var tr *merkle.Tree
				if how == "append" {
					tr = growTiled(t, height, raws, r)
				} else {
					tr = load(t, merkle.NewTiled(height, &leafSource{raws: raws}), raws)
				}
				for size := uint64(0); size <= uint64(len(raws)); size++ {
					got, err := tr.Root(size)
					if err != nil || !bytes.Equal(got, ref.HashAt(size)) {
						t.Fatalf("root of size %d differs from the reference (%v)", size, err)
					}
				}
				for i := uint64(0); i < uint64(len(raws)); i += 1 + uint64(r.IntN(5)) {
					got, err := tr.LeafHashAt(i)
					if err != nil || !bytes.Equal(got, merkle.LeafHash(raws[i])) {
						t.Fatalf("leaf hash %d differs (%v)", i, err)
					}
				}
				tile := uint64(1) << height
				pairs := [][2]uint64{{0, 0}, {0, 1}, {1, 1}, {1, 2}, {1, tile}, {tile - 1, tile}, {tile, tile + 1},
					{tile + 1, 2*tile + 1}, {tile + 1, tile + 2}, {3, 1100}, {1099, 1100}, {1024, 1100}}
				for range 300 {
					to := 1 + r.Uint64N(uint64(len(raws)))
					pairs = append(pairs, [2]uint64{1 + r.Uint64N(to), to})
				}
				for _, c := range pairs {
					from, to := c[0], c[1]
					p, err := tr.Consistency(from, to)
					want, _ := ref.ConsistencyProof(from, to)
					if err != nil || !sameHashes(p, want) {
						t.Fatalf("consistency %d→%d differs from the reference (%v)", from, to, err)
					}
					if to == 0 {
						continue
					}
					idx := (from + to) / 2 % to
					p, err = tr.Inclusion(idx, to)
					want, _ = ref.InclusionProof(idx, to)
					if err != nil || !sameHashes(p, want) {
						t.Fatalf("inclusion of %d in %d differs from the reference (%v)", idx, to, err)
					}
				}
			})
		}
	}
}

// TestLoadBuildsTheTreeAppendBuilds: Load (hashing on workers) gives the
// tree that appending the same leaves gives, full or tiled, at sizes
// around its batches and tiles.
func TestLoadBuildsTheTreeAppendBuilds(t *testing.T) {
	r := rand.New(rand.NewPCG(33, 34))
	raws := leaves(4096*2+300, r)
	for _, n := range []int{0, 1, 255, 256, 257, 4095, 4096, 4097, len(raws)} {
		for _, height := range []uint{0, 8} {
			src := &leafSource{raws: raws[:n]}
			got := load(t, merkle.NewTiled(height, src), raws[:n])
			want := merkle.NewTiled(height, src)
			if n > 0 {
				if err := want.Append(1, raws[:n]); err != nil {
					t.Fatal(err)
				}
			}
			if got.Size() != uint64(n) || !got.Equal(want) {
				t.Fatalf("%d leaves, height %d: the loaded tree differs from the appended one", n, height)
			}
			if err := got.Append(uint64(n)+1, raws[:1]); err != nil {
				t.Fatalf("%d leaves, height %d: append after load: %v", n, height, err)
			}
		}
	}
	full := load(t, merkle.New(), raws)
	if err := full.Load(func(func([]byte) error) error { return nil }); !errors.Is(err, merkle.ErrNotEmpty) {
		t.Fatalf("load into a tree with leaves: %v", err)
	}
	stop := errors.New("read failed")
	if err := merkle.New().Load(func(emit func([]byte) error) error {
		_ = emit(raws[0])
		return stop
	}); !errors.Is(err, stop) {
		t.Fatalf("a failing read: %v", err)
	}
}

// changedSource gives back one leaf other than the tree was built from.
type changedSource struct {
	leafSource
	at uint64
}

func (s *changedSource) LeafHashes(from, to uint64, out [][merkle.HashSize]byte) error {
	if err := s.leafSource.LeafHashes(from, to, out); err != nil {
		return err
	}
	if s.at >= from && s.at < to {
		out[s.at-from][0] ^= 1
	}
	return nil
}

// TestTiledTreeRefusesLeavesThatChanged: a tile whose leaves read back do
// not hash to the root the tree kept gives ErrTile, and a leaf source
// that fails gives its error; neither answers a proof.
func TestTiledTreeRefusesLeavesThatChanged(t *testing.T) {
	r := rand.New(rand.NewPCG(35, 36))
	raws := leaves(600, r)
	src := &changedSource{leafSource: leafSource{raws: raws}}
	tr := load(t, merkle.NewTiled(8, src), raws)
	src.at = 300
	if _, err := tr.Inclusion(290, 600); !errors.Is(err, merkle.ErrTile) {
		t.Fatalf("inclusion over a changed leaf: %v", err)
	}
	if _, err := tr.LeafHashAt(300); !errors.Is(err, merkle.ErrTile) {
		t.Fatalf("leaf hash of a changed leaf: %v", err)
	}
	if _, err := tr.Root(300); !errors.Is(err, merkle.ErrTile) {
		t.Fatalf("root inside a changed tile: %v", err)
	}
	// The right edge's leaves are in memory: no read, no refusal.
	if p, err := tr.Inclusion(599, 600); err != nil || len(p) == 0 {
		t.Fatalf("inclusion in the right edge: %v", err)
	}
	src.raws = raws[:500] // the log ends before the tree
	if _, err := tr.Consistency(510, 600); err == nil || errors.Is(err, merkle.ErrTile) {
		t.Fatalf("a leaf source that fails: %v", err)
	}
}

// TestTiledTreeReadsTheStoreWithNoLockHeld: while a proof request waits
// for its tile's leaves, the committer appends, and other proofs and
// roots are answered; run under -race with appends and proofs at once.
func TestTiledTreeReadsTheStoreWithNoLockHeld(t *testing.T) {
	r := rand.New(rand.NewPCG(37, 38))
	raws := leaves(2000, r)
	src := &blockingSource{leafSource: leafSource{raws: raws}, entered: make(chan struct{}), release: make(chan struct{})}
	tr := load(t, merkle.NewTiled(8, src), raws[:1000])
	ref := testonly.New(rfc6962.DefaultHasher)
	ref.AppendData(raws...)

	src.block.Store(true)
	proofDone := make(chan error)
	go func() {
		p, err := tr.Inclusion(10, 1000)
		want, _ := ref.InclusionProof(10, 1000)
		if err == nil && !sameHashes(p, want) {
			err = errors.New("inclusion differs from the reference")
		}
		proofDone <- err
	}()
	<-src.entered // the reader is inside the leaf source
	src.block.Store(false)
	if err := tr.Append(1001, raws[1000:1100]); err != nil { // would deadlock under a held lock
		t.Fatal(err)
	}
	if got, _ := tr.Root(1100); !bytes.Equal(got, ref.HashAt(1100)) {
		t.Fatal("root after the append differs")
	}
	close(src.release)
	if err := <-proofDone; err != nil {
		t.Fatal(err)
	}

	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		for i := 1100; i < len(raws); i += 50 {
			if err := tr.Append(uint64(i)+1, raws[i:i+50]); err != nil {
				t.Error(err)
				return
			}
		}
	}()
	for w := range 3 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			rr := rand.New(rand.NewPCG(uint64(w), 39))
			for range 100 {
				size := 1 + rr.Uint64N(tr.Size())
				from := 1 + rr.Uint64N(size)
				p, err := tr.Consistency(from, size)
				want, _ := ref.ConsistencyProof(from, size)
				if err != nil || !sameHashes(p, want) {
					t.Errorf("consistency %d→%d during appends: %v", from, size, err)
					return
				}
			}
		}()
	}
	wg.Wait()
}

type blockingSource struct {
	leafSource
	block   atomicBool
	entered chan struct{}
	release chan struct{}
	once    sync.Once
}

type atomicBool struct {
	mu sync.Mutex
	v  bool
}

func (b *atomicBool) Store(v bool) { b.mu.Lock(); b.v = v; b.mu.Unlock() }
func (b *atomicBool) Load() bool   { b.mu.Lock(); defer b.mu.Unlock(); return b.v }

func (s *blockingSource) LeafHashes(from, to uint64, out [][merkle.HashSize]byte) error {
	if s.block.Load() {
		s.once.Do(func() { close(s.entered) })
		<-s.release
	}
	return s.leafSource.LeafHashes(from, to, out)
}

// indexSource hashes a leaf's index: a log of any size in no memory.
type indexSource struct{}

func indexLeaf(i uint64) []byte {
	return []byte{byte(i), byte(i >> 8), byte(i >> 16), byte(i >> 24), byte(i >> 32)}
}

func (indexSource) LeafHashes(from, to uint64, out [][merkle.HashSize]byte) error {
	for i := from; i < to; i++ {
		copy(out[i-from][:], merkle.LeafHash(indexLeaf(i)))
	}
	return nil
}

// TestTiledTreeHeapPerLeaf: a tree of tile height 8 over a million leaves
// keeps at most 2 bytes of heap per leaf (a tree keeping every node: 64),
// and still proves a leaf deep inside.
func TestTiledTreeHeapPerLeaf(t *testing.T) {
	const n = 1 << 20
	heap := func() uint64 {
		var m runtime.MemStats
		runtime.GC()
		runtime.GC()
		runtime.ReadMemStats(&m)
		return m.HeapAlloc
	}
	before := heap()
	tr := merkle.NewTiled(8, indexSource{})
	if err := tr.Load(func(emit func([]byte) error) error {
		for i := uint64(0); i < n+100; i++ {
			if err := emit(indexLeaf(i)); err != nil {
				return err
			}
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	after := heap()
	perLeaf := float64(int64(after)-int64(before)) / float64(tr.Size())
	t.Logf("tile height 8, %d leaves: %.3f B of heap per leaf", tr.Size(), perLeaf)
	if perLeaf > 2 {
		t.Fatalf("%.2f B of heap per leaf, want ≤ 2", perLeaf)
	}
	p, err := tr.Inclusion(123456, tr.Size())
	if err != nil {
		t.Fatal(err)
	}
	root, _ := tr.Root(tr.Size())
	if err := merkle.VerifyInclusion(123457, tr.Size(), merkle.LeafHash(indexLeaf(123456)), p, root); err != nil {
		t.Fatal(err)
	}
	runtime.KeepAlive(tr)
}

// TestRootInMemoryReadsNothing: RootInMemory answers, without reading a
// leaf back, exactly the sizes the kept nodes and the right edge cover,
// with the reference's root; a tree keeping every node answers them all.
func TestRootInMemoryReadsNothing(t *testing.T) {
	r := rand.New(rand.NewPCG(41, 42))
	raws := leaves(600, r)
	ref := testonly.New(rfc6962.DefaultHasher)
	ref.AppendData(raws...)
	src := &leafSource{raws: raws}
	tiled, full := load(t, merkle.NewTiled(8, src), raws), load(t, merkle.New(), raws)
	for size := uint64(0); size <= 601; size++ {
		want := size <= 600 && (size%256 == 0 || size >= 512)
		got, ok := tiled.RootInMemory(size)
		if ok != want || (ok && !bytes.Equal(got, ref.HashAt(size))) {
			t.Fatalf("size %d: answered %v, want %v (or another root)", size, ok, want)
		}
		got, ok = full.RootInMemory(size)
		if ok != (size <= 600) || (ok && !bytes.Equal(got, ref.HashAt(size))) {
			t.Fatalf("full tree, size %d: answered %v", size, ok)
		}
	}
	if src.reads != 0 {
		t.Fatalf("%d reads of the leaf source", src.reads)
	}
}

// BenchmarkLoadPerEvent is Load's cost per event of a typical envelope
// (300 bytes) into a tiled tree (height 8), hashing on GOMAXPROCS
// workers; compare BenchmarkAppendPerEvent (one goroutine, every node
// kept).
func BenchmarkLoadPerEvent(b *testing.B) {
	r := rand.New(rand.NewPCG(43, 44))
	raw := make([]byte, 300)
	for j := range raw {
		raw[j] = byte(r.Uint32())
	}
	b.ReportAllocs()
	b.ResetTimer()
	tr := merkle.NewTiled(8, indexSource{})
	if err := tr.Load(func(emit func([]byte) error) error {
		for range b.N {
			if err := emit(raw); err != nil {
				return err
			}
		}
		return nil
	}); err != nil {
		b.Fatal(err)
	}
}
