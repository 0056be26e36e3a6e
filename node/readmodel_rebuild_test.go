package node_test

import (
	"path/filepath"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"taskledger/bench"
	"taskledger/commands"
	"taskledger/ledger"
	"taskledger/node"
	"taskledger/projections"
)

// The first start of a log without a read model (a generated history, a
// file from before it, another retention) rebuilds it by a replay of the
// whole log. Its writes must come between the replay's read
// transactions: a write that grows the file remaps it, and the remap
// waits for every open read transaction, the replay's own included, so
// a write from inside the replay hung the start for good (a 1,000,000-task
// history; here small slices make it grow the file at once).
func TestReadModelRebuildWritesOutsideItsReads(t *testing.T) {
	defer node.SetRebuildChunk(16)()
	dir := filepath.Join(t.TempDir(), "h")
	h, err := bench.GenerateHistory(bench.HistoryConfig{Dir: dir, Finished: 4000, PerDay: 400, Live: 20, Devices: 8,
		End: time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)})
	if err != nil {
		t.Fatal(err)
	}
	n, err := node.Open(node.Config{DataDir: dir, Commands: commands.DefaultConfig(), Logger: zerolog.Nop()})
	if err != nil {
		t.Fatal(err)
	}
	var settled uint64
	n.Engine.Read(func(st *projections.State) {
		for state, c := range st.StateCounts() {
			if state == "SUCCEEDED" || state == "FAILED" || state == "CANCELED" {
				settled += uint64(c)
			}
		}
	})
	if settled != uint64(h.Finished) {
		t.Fatalf("%d finished tasks counted after the rebuild, want %d", settled, h.Finished)
	}
	if err := n.Close(); err != nil {
		t.Fatal(err)
	}
	store, err := ledger.Open(dir, ledger.Options{ReadOnly: true})
	if err != nil {
		t.Fatal(err)
	}
	defer store.Close()
	onDisk := 0
	if err := store.ReadModelScan(projections.RMTasks, nil, nil, false, func(_, _ []byte) (bool, error) {
		onDisk++
		return true, nil
	}); err != nil {
		t.Fatal(err)
	}
	// Ten days of history, three of them within the records' retention.
	if onDisk < h.Finished/2 {
		t.Fatalf("%d tasks in the read model, want most of the %d finished", onDisk, h.Finished)
	}
	cfg := projections.Config{IdempotencyRetentionMs: commands.DefaultConfig().IdempotencyRetention.Milliseconds()}
	if _, err := node.Verify(store, cfg, nil); err != nil {
		t.Fatalf("verify after the rebuild: %v", err)
	}
}
