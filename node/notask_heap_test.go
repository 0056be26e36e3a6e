package node_test

import (
	"context"
	"fmt"
	"runtime"
	"sync"
	"testing"
	"time"

	"taskledger/bench"
	"taskledger/node/nodetest"
)

// TestNoTaskPollsDoNotGrowTheHeap: claim-next polls answered "no task"
// (decided by the sequencer, their soft records committed with fsync)
// leave nothing in the live heap once those records have expired and
// been collected: after 20,000 polls it holds what it held after 2,000,
// within a few bytes a poll. (Not a timing test: it measures memory after
// a collection.)
func TestNoTaskPollsDoNotGrowTheHeap(t *testing.T) {
	n := nodetest.Start(t, nodetest.WithConfig(softRetention))
	ctx := context.Background()
	drv := &bench.InProcess{Engine: n.Engine, Operator: "initial"}
	devices := make([]*bench.Device, 16)
	for i := range devices {
		d, err := drv.RegisterDevice(ctx)
		if err != nil {
			t.Fatal(err)
		}
		devices[i] = d
	}
	// polls sends count polls (new keys, every device at once), then lets
	// their records expire and collects them.
	polls := func(count int) {
		t.Helper()
		var wg sync.WaitGroup
		errs := make(chan error, len(devices))
		for _, d := range devices {
			if err := drv.Presence(ctx, d); err != nil {
				t.Fatal(err)
			}
			wg.Go(func() {
				for range count / len(devices) {
					if c, err := drv.Claim(ctx, d); err != nil || c != nil {
						errs <- fmt.Errorf("a poll found a task (%v) or failed: %w", c, err)
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
		wantSoft(t, n, count)
		n.Advance(time.Hour) // every record expired
		for collect(t, n) > 0 {
		}
		wantSoft(t, n, 0)
	}
	heap := func() int64 {
		runtime.GC()
		runtime.GC()
		var m runtime.MemStats
		runtime.ReadMemStats(&m)
		return int64(m.HeapAlloc)
	}
	// Rounds of 2,000 polls, each within one retention: what a fleet
	// that only polls holds is one retention's records (the ledger file
	// and bbolt's list of its free pages grow to hold them in the first
	// round, and are reused after).
	const round, rounds = 2_000, 10
	polls(round) // every pool and buffer the polls use is made here
	before := heap()
	for range rounds - 1 {
		polls(round)
	}
	grown := heap() - before
	// A held record is ~300 bytes; 2 bytes a poll would be 36 kB.
	if perPoll := float64(grown) / (round * (rounds - 1)); perPoll > 2 {
		t.Fatalf("the live heap grew by %d bytes (%.1f a poll) from %d to %d polls that found no task",
			grown, perPoll, round, round*rounds)
	}
	t.Logf("live heap after %d polls: %d bytes; after %d: %+d", round, before, round*rounds, grown)
}
