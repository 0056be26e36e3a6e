package gcfloor

import (
	"runtime"
	"runtime/debug"
	"testing"
	"time"
)

// reset puts the collector back as the test found it, floor off.
func reset(t *testing.T) {
	percent := Current()
	t.Cleanup(func() { Set(percent, 0) })
}

// inForce is the GOGC in force and the live heap of the last collection
// the floor saw, read together.
func inForce() (percent int, last heap) {
	st.Lock()
	defer st.Unlock()
	percent = debug.SetGCPercent(-1)
	debug.SetGCPercent(percent)
	return percent, st.last
}

// collect runs a collection and waits until the floor has seen its end.
func collect(t *testing.T) {
	t.Helper()
	st.Lock()
	before := st.seen
	st.Unlock()
	runtime.GC()
	deadline := time.Now().Add(10 * time.Second)
	for {
		st.Lock()
		seen := st.seen
		st.Unlock()
		if seen > before {
			return
		}
		if time.Now().After(deadline) {
			t.Fatal("the floor saw no collection end within 10 s")
		}
		runtime.GC() // a cleanup queued by the last cycle runs after it
		time.Sleep(time.Millisecond)
	}
}

func TestPercentReachesTheFloorFromTheLiveHeap(t *testing.T) {
	const mb = 1 << 20
	for _, c := range []struct {
		percent int
		floor   uint64
		h       heap
		want    int
	}{
		{400, 256 * mb, heap{10 * mb, 10 * mb}, 2460},  // 10 + 10 × 24.6 = 256
		{400, 256 * mb, heap{10 * mb, 41 * mb}, 600},   // stacks and globals count: 10 + 41 × 6 = 256
		{400, 256 * mb, heap{100 * mb, 100 * mb}, 400}, // 5 × 100 already passes the floor
		{400, 256 * mb, heap{300 * mb, 300 * mb}, 400}, // above the floor
		{400, 0, heap{10 * mb, 10 * mb}, 400},          // no floor
		{400, 256 * mb, heap{}, 400},                   // nothing measured yet
		{-1, 256 * mb, heap{10 * mb, 10 * mb}, -1},     // off stays off
		{100, 256 * mb, heap{1, 1}, 6400},              // the runtime's minimum, 4 MiB × 64, is the floor
		{400, 256 * mb, heap{mb, 2 * mb}, 6400},        // 1 + 2 × 127.5 would be a goal; the minimum at 12750 % would be 510 MB
	} {
		if got := percentFor(c.percent, c.floor, c.h); got != c.want {
			t.Errorf("percentFor(%d, %d, %+v) = %d, want %d", c.percent, c.floor, c.h, got, c.want)
		}
	}
}

// TestTheFloorRaisesThePercentAfterEachCollection: with a floor far above
// the test binary's live heap, the percent in force after a collection is
// the one that reaches the floor; without a floor it is the one set.
func TestTheFloorRaisesThePercentAfterEachCollection(t *testing.T) {
	reset(t)
	const floor = 64 << 20
	Set(100, floor)
	collect(t)
	got, last := inForce()
	if last.live == 0 || last.scanned < last.live || last.scanned > floor/4 {
		t.Fatalf("the last collection left %+v: the test needs a small heap", last)
	}
	if want := percentFor(100, floor, last); got != want || got <= 100 {
		t.Fatalf("GOGC %d after a collection that left %+v, want %d", got, last, want)
	}
	Set(100, 0)
	collect(t)
	if got := Current(); got != 100 {
		t.Fatalf("GOGC %d after the floor was taken away, want 100", got)
	}
}

// TestPauseHoldsTheCollectorOffAcrossCollections: a collection's end does
// not turn a paused collector back on; pauses nest; the last resume
// applies the floor.
func TestPauseHoldsTheCollectorOffAcrossCollections(t *testing.T) {
	reset(t)
	const floor = 64 << 20
	Set(200, floor)
	outer := Pause()
	inner := Pause()
	if got := Current(); got != -1 {
		t.Fatalf("GOGC %d while paused, want off", got)
	}
	collect(t)
	inner()
	if got := Current(); got != -1 {
		t.Fatalf("GOGC %d after a collection and the inner resume, want off", got)
	}
	outer()
	outer() // a resume counts once
	if got, want := Current(), percentFor(200, floor, lastHeap()); got != want || got <= 200 {
		t.Fatalf("GOGC %d after the last resume, want %d", got, want)
	}
}

// TestPauseWithoutAFloorRestoresThePercentItFound: the node's loads pause
// in processes (and tests) that never set a floor.
func TestPauseWithoutAFloorRestoresThePercentItFound(t *testing.T) {
	reset(t)
	Set(100, 0)
	debug.SetGCPercent(137)
	resume := Pause()
	if got := Current(); got != -1 {
		t.Fatalf("GOGC %d while paused, want off", got)
	}
	resume()
	if got := Current(); got != 137 {
		t.Fatalf("GOGC %d after resume, want the 137 it found", got)
	}
}

func TestTheFloorIsAQuarterOfASmallLimit(t *testing.T) {
	for _, c := range []struct {
		limit int64
		want  uint64
	}{
		{0, DefaultFloor},
		{-1, DefaultFloor},
		{1 << 40, DefaultFloor},
		{4 * DefaultFloor, DefaultFloor},
		{512 << 20, 128 << 20},
	} {
		if got := FloorFor(c.limit); got != c.want {
			t.Errorf("FloorFor(%d) = %d, want %d", c.limit, got, c.want)
		}
	}
}
