package node_test

import (
	"math"
	"path/filepath"
	"runtime"
	"runtime/debug"
	"testing"

	"taskledger/bench"
	"taskledger/ledger"
	"taskledger/node"
)

// TestRebuildHoldsTheCollectorOffOnlyUnderAMemoryLimit: a full replay
// runs no collection while a soft memory limit bounds the heap, collects
// as set without one, and leaves the setting as it found it.
func TestRebuildHoldsTheCollectorOffOnlyUnderAMemoryLimit(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "log")
	l, err := bench.BuildReplayLog(dir, 10000, 100, bench.MixLifecycle)
	if err != nil {
		t.Fatal(err)
	}
	store, err := ledger.Open(dir, ledger.Options{ReadOnly: true})
	if err != nil {
		t.Fatal(err)
	}
	defer store.Close()
	prevPercent, prevLimit := debug.SetGCPercent(1), debug.SetMemoryLimit(math.MaxInt64) // a collection every few kB
	defer func() { debug.SetGCPercent(prevPercent); debug.SetMemoryLimit(prevLimit) }()
	collections := func() uint32 {
		st, err := node.Rebuild(store, l.Cfg)
		if err != nil || st.Head.Seq != l.Events {
			t.Fatalf("rebuild: %v", err)
		}
		var m runtime.MemStats
		runtime.ReadMemStats(&m)
		return m.NumGC
	}
	runtime.GC()
	before := collections()
	unlimited := collections() - before
	if unlimited < 4 {
		t.Fatalf("%d collections during a replay without a memory limit at GOGC=1", unlimited)
	}
	debug.SetMemoryLimit(1 << 40)
	runtime.GC()
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	// At most the one that turning the collector back on may start.
	if limited := collections() - m.NumGC; limited > 1 {
		t.Fatalf("%d collections during a replay under a memory limit (%d without)", limited, unlimited)
	}
	t.Logf("%d collections without a limit", unlimited)
	if got := debug.SetGCPercent(1); got != 1 {
		t.Fatalf("the replay left GOGC at %d, not 1", got)
	}
}
