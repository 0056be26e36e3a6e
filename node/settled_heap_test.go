package node_test

import (
	"context"
	"runtime"
	"sync"
	"testing"
	"time"

	"taskledger/bench"
	"taskledger/commands"
	"taskledger/ledger"
	"taskledger/node/nodetest"
	"taskledger/projections"
)

// heapOf returns the live heap a build holds, after a collection.
func heapOf(t *testing.T, build func() *projections.State) (*projections.State, int64) {
	t.Helper()
	runtime.GC()
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	st := build()
	runtime.GC()
	runtime.ReadMemStats(&after)
	runtime.KeepAlive(st)
	return st, int64(after.HeapAlloc) - int64(before.HeapAlloc)
}

// TestSettledTasksLeaveTheHeap: a replay of a log of finished tasks whose
// records all expired (tasks and tombstones in the read model on disk)
// holds at most 64 B per finished task (the filter of its expired keys:
// about 4 B), against the 1.3 KB it holds with the tasks and their
// records in memory (KeepSettled, a retention that never expires them, as
// before the read model). It logs both
// figures per finished task. (Not a timing test: it measures memory after
// a collection.)
func TestSettledTasksLeaveTheHeap(t *testing.T) {
	const tasks = 8000
	n := nodetest.Start(t, nodetest.WithConfig(func(c *commands.Config) { c.IdempotencyRetention = time.Hour }))
	ctx := context.Background()
	drv := &bench.InProcess{Engine: n.Engine, Operator: "initial"}
	var wg sync.WaitGroup
	errs := make(chan error, 16)
	for range 16 {
		wg.Go(func() {
			for range tasks / 16 {
				id, err := drv.CreateTask(ctx)
				if err == nil {
					err = drv.Cancel(ctx, id)
				}
				if err != nil {
					errs <- err
					return
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	n.Advance(2 * time.Hour)
	n.CreateTask(nil) // settles them all
	dir := n.Dir
	n.Close()
	store, err := ledger.Open(dir, ledger.Options{ReadOnly: true})
	if err != nil {
		t.Fatal(err)
	}
	defer store.Close()
	rebuild := func(retention time.Duration, keep bool) func() *projections.State {
		return func() *projections.State {
			st, err := projections.Rebuild(store, projections.Config{IdempotencyRetentionMs: retention.Milliseconds(), KeepSettled: keep})
			if err != nil {
				t.Fatal(err)
			}
			return st
		}
	}
	live, liveHeap := heapOf(t, rebuild(1000*time.Hour, true))
	// Tests running in parallel allocate meanwhile: the least of three
	// measurements is the closest to what the replay itself holds.
	settled, settledHeap := heapOf(t, rebuild(time.Hour, false))
	for range 2 {
		if _, h := heapOf(t, rebuild(time.Hour, false)); h < settledHeap {
			settledHeap = h
		}
	}
	if len(live.Tasks) != tasks+1 || len(settled.Tasks) != 1 {
		t.Fatalf("%d tasks in memory without settling, %d settled", len(live.Tasks), len(settled.Tasks))
	}
	if got := settled.StateCounts()[string(projections.StateCanceled)]; got != tasks {
		t.Fatalf("settled replay counts %d canceled tasks, want %d", got, tasks)
	}
	liveSnap, _ := live.Canonical()
	settledSnap, _ := settled.Canonical()
	t.Logf("per finished task: replayed heap %d B in memory (records unexpired), %d B settled (%d tombstones in memory); snapshot content %d B, %d B settled",
		liveHeap/tasks, settledHeap/tasks, len(settled.Idem.Tombstones), len(liveSnap)/tasks, len(settledSnap)/tasks)
	if len(settledSnap) > 16*tasks {
		t.Fatalf("a snapshot of settled tasks holds %d B per task", len(settledSnap)/tasks)
	}
	if settledHeap > 64*tasks {
		t.Fatalf("settled replay holds %d B per finished task (the in-memory one %d B)", settledHeap/tasks, liveHeap/tasks)
	}
}
