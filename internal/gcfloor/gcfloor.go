// Package gcfloor owns the process's GOGC: the percent it runs with, a
// floor under the collector's heap goal, and the pauses that turn the
// collector off while a load builds memory that stays.
//
// GOGC sets the next collection at the live heap times (1 + GOGC/100).
// When the live heap is small, as it is on a young ledger or one that
// keeps little in memory, that target is a few tens of megabytes and the
// sequencer's few kilobytes of garbage a command reach it several times a
// second; each mark phase takes a share of the processors and makes the
// allocating goroutines (the sequencer, the committer) assist, and the
// commands whose commit meets one are the slowest hundredth. A floor keeps
// the target at least floor bytes: after each collection the percent is
// raised, for the next cycle only, to what reaches the floor from the live
// heap just marked, and never set below the configured percent. A soft
// memory limit (debug.SetMemoryLimit) still bounds the heap above it.
package gcfloor

import (
	"runtime"
	"runtime/debug"
	"runtime/metrics"
	"sync"
)

// DefaultPercent is the GOGC of serve and the benchmarks, and
// DefaultFloor their heap floor, bounded by FloorFor.
const (
	DefaultPercent = 400
	DefaultFloor   = 1 << 30
	// floorLimitShare bounds the floor to 1/floorLimitShare of a soft
	// memory limit.
	floorLimitShare = 4
)

// FloorFor is DefaultFloor, or a quarter of a soft memory limit (bytes;
// ≤ 0: none) below four times it: the floor leaves the limit room.
func FloorFor(limit int64) uint64 {
	if limit > 0 && limit/floorLimitShare < DefaultFloor {
		return uint64(limit / floorLimitShare)
	}
	return DefaultFloor
}

var st struct {
	sync.Mutex
	percent int    // the configured GOGC (Set); < 0 is off
	floor   uint64 // bytes; 0: no floor
	armed   bool   // a sentinel waits for the next collection
	paused  int    // Pause calls not yet resumed
	prev    int    // the percent in force when the first pause began
	seen    uint64 // collections whose end the floor saw
	last    heap   // what the last of them left
}

// Set sets GOGC to percent and keeps the heap goal at least floor bytes
// (0: no floor) from the next collection on. The floor is applied after
// each collection while the process lives; Set again replaces both.
func Set(percent int, floor uint64) {
	st.Lock()
	defer st.Unlock()
	st.percent, st.floor = percent, floor
	if st.paused > 0 {
		st.prev = percent // the last resume applies it
	} else {
		debug.SetGCPercent(percentFor(percent, floor, lastHeap()))
	}
	if floor > 0 && !st.armed {
		st.armed = true
		arm()
	}
}

// heap is what a collection left: the heap it marked live, and what the
// percent multiplies (the live heap, the goroutine stacks and the globals
// it scanned). The next collection starts near
// live + scanned × GOGC/100.
type heap struct{ live, scanned uint64 }

// percentFor is the GOGC that puts the next collection at floor bytes of
// heap after a collection that left h, and never below percent (off stays
// off; no floor, or nothing measured yet, is percent).
func percentFor(percent int, floor uint64, h heap) int {
	if percent < 0 || floor == 0 || h.scanned == 0 || h.live >= floor {
		return percent
	}
	p := (floor - h.live) * 100 / h.scanned
	// The runtime never sets the goal below its heap minimum, 4 MiB ×
	// GOGC/100: from a live heap of a few hundred kilobytes the percent
	// above would put the minimum, and the goal, far past the floor.
	p = min(p, floor*100/heapMinimum)
	return max(percent, int(p))
}

// heapMinimum is the runtime's heap minimum at GOGC=100.
const heapMinimum = 4 << 20

// Current is the GOGC in force (read without a race with the floor).
func Current() int {
	st.Lock()
	defer st.Unlock()
	p := debug.SetGCPercent(-1)
	debug.SetGCPercent(p)
	return p
}

// Pause turns the collector off until the returned function is called
// (calls nest: the last one restores the percent, with the floor applied
// to the live heap of the moment). A load pauses it: restoring a snapshot
// allocates the whole projections at once and keeps all of it, so
// collecting meanwhile only marks memory that stays live (about half the
// CPU of a million-task restore, and the write barriers on every pointer
// it stores); the first collection runs after the restore, concurrently
// with the rest of start-up and serving.
func Pause() (resume func()) {
	st.Lock()
	if st.paused == 0 {
		st.prev = debug.SetGCPercent(-1)
		if st.floor > 0 {
			st.prev = st.percent
		}
	}
	st.paused++
	st.Unlock()
	return sync.OnceFunc(func() {
		st.Lock()
		defer st.Unlock()
		st.paused--
		if st.paused == 0 {
			debug.SetGCPercent(percentFor(st.prev, st.floor, lastHeap()))
		}
	})
}

// sentinel is an object nothing refers to: its cleanup runs after the
// collection that found it unreachable, which is how the package learns
// that a cycle ended. It holds a pointer so that the allocator does not
// pack it with others in one tiny block.
type sentinel struct{ _ *byte }

// arm waits for the next collection. Called with st held or from a
// cleanup.
func arm() {
	runtime.AddCleanup(&sentinel{}, func(struct{}) { collected() }, struct{}{})
}

// collected applies the floor to the live heap the collection just marked
// and waits for the next one.
func collected() {
	st.Lock()
	defer st.Unlock()
	st.seen++
	st.last = lastHeap()
	if st.floor == 0 {
		st.armed = false
		return
	}
	if st.paused == 0 {
		debug.SetGCPercent(percentFor(st.percent, st.floor, st.last))
	}
	arm()
}

// lastHeap is what the last collection left (zero before the first one).
func lastHeap() heap {
	s := []metrics.Sample{{Name: "/gc/heap/live:bytes"}, {Name: "/gc/scan/stack:bytes"}, {Name: "/gc/scan/globals:bytes"}}
	metrics.Read(s)
	var v [3]uint64
	for i := range s {
		if s[i].Value.Kind() == metrics.KindUint64 {
			v[i] = s[i].Value.Uint64()
		}
	}
	if v[0] == 0 {
		return heap{}
	}
	return heap{live: v[0], scanned: v[0] + v[1] + v[2]}
}
