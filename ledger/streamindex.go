package ledger

import (
	"cmp"
	"encoding/binary"
	"fmt"
	"math"
	"slices"
	"strings"
	"sync"

	bolt "go.etcd.io/bbolt"
)

// streamIndexBatch is how many events' stream-index entries are kept in
// memory before Append starts writing them to the streams bucket in a
// sorted pass (a variable so tests can lower it).
//
// Writing each event's (stream, version) key in its own batch put one
// random key per event into a B+tree ordered by stream name: every batch
// dirtied about one leaf page per task it touched, and the commit wrote and
// fsynced those pages. Deferring the entries turns that into one sorted
// pass every streamIndexBatch events (see doc.go and docs/performance.md).
var streamIndexBatch = 8192

// streamIndexChunk is the least number of a pass's sorted entries one
// Append writes (at least twice the batch's events, so a pass always
// outruns the events arriving meanwhile). A pass written at once made one
// commit in every streamIndexBatch events 10–40 ms long, and every command
// decided meanwhile waited for it; spread over the commits that follow, in
// key order, each commit touches only its slice of the tree's pages.
var streamIndexChunk = 256

// streamIndexSortOff is the least number of entries a pass sorts off the
// commit path: the Append that reaches streamIndexBatch hands a copy of
// the entries to a goroutine, and the first Append after it is done writes
// the pass's first chunk. Sorting 8,192 entries by stream name in the
// commit made one commit in about forty 2–3 ms longer, in the build of its
// transaction, and every command decided meanwhile waited for it (the
// slowest 2 % of commits, docs/performance.md). Fewer entries sort in
// less time than a goroutine takes to start, in the Append itself.
var streamIndexSortOff = 1024

var keyStreamsIndexed = []byte("streams_indexed")

// streamEntry is one event's place in its stream.
type streamEntry struct {
	stream  string
	version uint64
	seq     uint64
}

// streamIndex holds the entries of committed events the streams bucket
// does not have yet: every event after the meta "streams_indexed" seq.
type streamIndex struct {
	mu       sync.Mutex
	pending  []streamEntry
	byStream map[string][]uint64 // pending's seqs of each stream, in order (reads of one stream)
	pass     *streamPass         // the pass being written; only Append touches it
	sort     *streamSort         // the next pass's entries being sorted; only Append touches it
}

// indexState is what a streamIndex becomes when the Append that wrote it
// commits (set): the pending entries, the pass under way, the sort under
// way. A sort started by an Append that does not commit is dropped with it.
type indexState struct {
	pending []streamEntry
	pass    *streamPass
	sort    *streamSort
}

// streamSort is a pass's entries being sorted by a goroutine, which closes
// done when entries are in key order: a copy of the pending entries of
// every event through seq `through`.
type streamSort struct {
	entries []streamEntry
	through uint64
	done    chan struct{}
}

// startSort sorts a copy of entries off the commit path.
func startSort(entries []streamEntry, through uint64) *streamSort {
	s := &streamSort{entries: slices.Clone(entries), through: through, done: make(chan struct{})}
	go func() {
		sortEntries(s.entries)
		close(s.done)
	}()
	return s
}

// sortEntries puts entries in the streams bucket's key order.
func sortEntries(entries []streamEntry) {
	slices.SortFunc(entries, func(a, b streamEntry) int {
		if c := strings.Compare(a.stream, b.stream); c != 0 {
			return c
		}
		return cmp.Compare(a.version, b.version)
	})
}

// streamPass is a sorted pass spread over several Appends: sorted holds
// the entries of every event through seq `through`, in key order, and
// sorted[:done] are in the bucket. The meta "streams_indexed" seq moves to
// `through` with the last chunk; a pass cut short (a restart) is written
// again from the start (a Put of an entry already there changes nothing).
type streamPass struct {
	sorted  []streamEntry
	done    int
	through uint64
}

// indexedThrough is the seq through which the streams bucket is complete
// (every seq when the meta key is absent: ledgers that never deferred).
func indexedThrough(tx *bolt.Tx) uint64 {
	v := tx.Bucket(bucketMeta).Get(keyStreamsIndexed)
	if len(v) != 8 {
		return math.MaxUint64
	}
	return binary.BigEndian.Uint64(v)
}

// load rebuilds the pending entries from the events after the indexed seq.
func (x *streamIndex) load(db *bolt.DB) error {
	var pending []streamEntry
	err := db.View(func(tx *bolt.Tx) error {
		after := indexedThrough(tx)
		if after == math.MaxUint64 {
			return nil
		}
		c := tx.Bucket(bucketEvents).Cursor()
		for k, v := c.Seek(u64(after + 1)); k != nil; k, v = c.Next() {
			e, err := DecodeEvent(v)
			if err != nil {
				return fmt.Errorf("seq %d: %w", binary.BigEndian.Uint64(k), err)
			}
			pending = append(pending, streamEntry{stream: e.Stream, version: e.StreamVersion, seq: e.Seq})
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("ledger: stream index tail: %w", err)
	}
	x.set(indexState{pending: pending})
	return nil
}

// write runs inside Append's transaction after the batch's events were
// put. When the pending entries and the batch's reach streamIndexBatch it
// starts a pass over all of them, sorted (off the commit path from
// streamIndexSortOff entries: the pass then starts with the first Append
// after the sort is done); while a pass is under way each Append writes
// its next chunk, and the last chunk moves the indexed seq to the pass's
// last event and drops those entries from pending. Otherwise it only makes
// sure the indexed seq is recorded. It returns what the index becomes if
// the transaction commits (set).
func (x *streamIndex) write(tx *bolt.Tx, b *Batch, head Head) (indexState, error) {
	// Appends are serialized (Store.appendMu) and readers only look at
	// pending[:len] under mu, so the writer may fill the backing array past
	// len; set publishes the new length after the commit.
	x.mu.Lock()
	next := x.pending
	x.mu.Unlock()
	for _, e := range b.Events {
		next = append(next, streamEntry{stream: e.Stream, version: e.StreamVersion, seq: e.Seq})
	}
	meta := tx.Bucket(bucketMeta)
	if meta.Get(keyStreamsIndexed) == nil {
		if err := meta.Put(keyStreamsIndexed, u64(b.Expected.Seq)); err != nil {
			return indexState{}, err
		}
	}
	pass := x.pass
	if pass == nil {
		switch {
		case x.sort != nil:
			select {
			case <-x.sort.done:
				pass = &streamPass{sorted: x.sort.entries, through: x.sort.through}
			default: // still sorting
				return indexState{pending: next, sort: x.sort}, nil
			}
		case len(next) < streamIndexBatch:
			return indexState{pending: next}, nil
		case len(next) >= streamIndexSortOff:
			return indexState{pending: next, sort: startSort(next, head.Seq)}, nil
		default:
			sorted := slices.Clone(next)
			sortEntries(sorted)
			pass = &streamPass{sorted: sorted, through: head.Seq}
		}
	}
	end := min(len(pass.sorted), pass.done+max(streamIndexChunk, 2*len(b.Events)))
	for end < len(pass.sorted) && pass.sorted[end].stream == pass.sorted[end-1].stream {
		end++ // a stream's run is never cut between two chunks
	}
	if err := putRuns(tx, pass.sorted[pass.done:end]); err != nil {
		return indexState{}, err
	}
	if end < len(pass.sorted) {
		return indexState{pending: next, pass: &streamPass{sorted: pass.sorted, done: end, through: pass.through}}, nil
	}
	// The pass is complete: pending keeps the entries after it (next is
	// in seq order), in a fresh array so the written ones can be freed.
	i, _ := slices.BinarySearchFunc(next, pass.through, func(e streamEntry, seq uint64) int { return cmp.Compare(e.seq, seq) })
	if i < len(next) && next[i].seq == pass.through {
		i++
	}
	rest := make([]streamEntry, len(next)-i, max(len(next)-i, streamIndexBatch))
	copy(rest, next[i:])
	return indexState{pending: rest}, meta.Put(keyStreamsIndexed, u64(pass.through))
}

// putRuns writes sorted entries as runs: each stream's consecutive
// entries under one key, its first version, whose value is their seqs (8
// bytes each, in version order). A pass holds every event of a stream
// after the indexed seq, so a stream's entries in it are consecutive
// versions. One key per stream and pass, not per event, dirties one leaf
// page per stream the chunk touches and keeps the bucket several times
// smaller. The first run of more than one seq moves the file's format
// to formatRuns: a binary that reads one seq per key refuses the file.
func putRuns(tx *bolt.Tx, sorted []streamEntry) error {
	streams := tx.Bucket(bucketStreams)
	upgraded := false
	for i := 0; i < len(sorted); {
		j := i + 1
		for j < len(sorted) && sorted[j].stream == sorted[i].stream {
			j++
		}
		v := make([]byte, 0, 8*(j-i))
		for _, e := range sorted[i:j] {
			v = binary.BigEndian.AppendUint64(v, e.seq)
		}
		if err := streams.Put(streamKey(sorted[i].stream, sorted[i].version), v); err != nil {
			return err
		}
		if j-i > 1 && !upgraded {
			if err := upgradeFormat(tx, formatRuns); err != nil {
				return err
			}
			upgraded = true
		}
		i = j
	}
	return nil
}

// set installs the index's state after a commit (or a load). The pending
// entries either extend the ones before (a commit's events) or replace
// them (a pass completed, or a load): byStream takes the new entries, or
// is built again from them.
func (x *streamIndex) set(st indexState) {
	pending := st.pending
	x.mu.Lock()
	from := len(x.pending)
	if len(pending) < from || (from > 0 && pending[0].seq != x.pending[0].seq) || x.byStream == nil {
		x.byStream, from = make(map[string][]uint64), 0
	}
	for _, e := range pending[from:] {
		x.byStream[e.stream] = append(x.byStream[e.stream], e.seq)
	}
	x.pending = pending
	x.mu.Unlock()
	x.pass, x.sort = st.pass, st.sort
}

// tail returns the pending seqs of stream, in stream order (a copy: a
// later commit appends to them).
func (x *streamIndex) tail(stream string) []uint64 {
	x.mu.Lock()
	defer x.mu.Unlock()
	return slices.Clone(x.byStream[stream])
}
