package merkle

import (
	"crypto/sha256"
	"runtime"
	"sync"
	"sync/atomic"
)

// loadBatch is the number of leaves a worker of Load hashes at a time: a
// multiple of every tile size (2^MaxTileHeight), so that a batch of a
// load from the empty tree holds whole tiles.
const loadBatch = 1 << MaxTileHeight

// loadJob is one batch of Load: the leaves' stored bytes back to back,
// each after the leaf prefix byte, so that one sha256.Sum256 over a
// slice of the arena is its leaf hash.
type loadJob struct {
	arena  []byte
	ends   []int // end of each leaf's bytes in arena
	leaves [][HashSize]byte
	roots  [][HashSize]byte // roots of the batch's complete tiles (a tiled tree)
	done   chan struct{}
}

// hash computes the batch's leaf hashes and, for a tiled tree, the roots
// of its complete tiles.
func (j *loadJob) hash(height uint, scratch [][HashSize]byte) {
	j.leaves = j.leaves[:len(j.ends)]
	start := 0
	for i, end := range j.ends {
		j.leaves[i] = sha256.Sum256(j.arena[start:end])
		start = end
	}
	j.roots = j.roots[:0]
	if height == 0 {
		return
	}
	size := 1 << height
	for k := 0; (k+1)*size <= len(j.leaves); k++ {
		j.roots = append(j.roots, subtreeRoot(j.leaves[k*size:(k+1)*size], scratch))
	}
}

// Load fills an empty tree with every leaf read gives emit, in order (the
// bytes need only live during the call: they are copied). The leaves are
// hashed on GOMAXPROCS workers while read goes on; a tiled tree gets the
// roots of its complete tiles from the workers too, so the tree itself
// hashes next to nothing. The result is the tree Append would build.
func (t *Tree) Load(read func(emit func(raw []byte) error) error) error {
	if t.Size() != 0 {
		return ErrNotEmpty
	}
	workers := runtime.GOMAXPROCS(0)
	inFlight := 2*workers + 2
	free := make(chan *loadJob, inFlight)
	for range inFlight {
		free <- &loadJob{
			ends:   make([]int, 0, loadBatch),
			leaves: make([][HashSize]byte, loadBatch),
			roots:  make([][HashSize]byte, 0, loadBatch),
		}
	}
	work := make(chan *loadJob, inFlight)
	order := make(chan *loadJob, inFlight)

	var wg sync.WaitGroup
	for range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			scratch := make([][HashSize]byte, loadBatch/2)
			for j := range work {
				j.hash(t.height, scratch)
				close(j.done)
			}
		}()
	}

	var failed atomic.Pointer[error]
	appended := make(chan struct{})
	go func() { // the appender: batches in read order
		defer close(appended)
		for j := range order {
			<-j.done
			if failed.Load() == nil {
				if err := t.appendLoaded(j); err != nil {
					failed.Store(&err)
				}
			}
			j.arena, j.ends = j.arena[:0], j.ends[:0]
			free <- j
		}
	}()

	cur := <-free
	send := func() {
		cur.done = make(chan struct{})
		order <- cur
		work <- cur
	}
	err := read(func(raw []byte) error {
		if e := failed.Load(); e != nil {
			return *e
		}
		cur.arena = append(cur.arena, rfc6962LeafPrefix)
		cur.arena = append(cur.arena, raw...)
		cur.ends = append(cur.ends, len(cur.arena))
		if len(cur.ends) == loadBatch {
			send()
			cur = <-free
		}
		return nil
	})
	if err == nil && len(cur.ends) > 0 {
		send()
	}
	close(work)
	close(order)
	<-appended
	wg.Wait()
	if err != nil {
		return err
	}
	if e := failed.Load(); e != nil {
		return *e
	}
	return nil
}

// appendLoaded appends one hashed batch: a tiled tree takes the roots of
// its complete tiles and the leaves after them, a full tree every leaf.
func (t *Tree) appendLoaded(j *loadJob) error {
	t.mu.Lock()
	defer t.mu.Unlock()
	n := 0
	for _, root := range j.roots {
		if err := t.appendTile(append([]byte(nil), root[:]...)); err != nil {
			return err
		}
		n += 1 << t.height
	}
	for _, leaf := range j.leaves[n:] {
		if err := t.rng.Append(append([]byte(nil), leaf[:]...), t.store); err != nil {
			return err
		}
	}
	return nil
}
