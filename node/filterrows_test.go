package node_test

import (
	"bytes"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"taskledger/bench"
	"taskledger/commands"
	"taskledger/ledger"
	"taskledger/node"
	"taskledger/projections"
)

// filterRowKeys lists the keys of the read model's tombstone-filter rows.
func filterRowKeys(t *testing.T, store *ledger.Store) []string {
	t.Helper()
	var keys []string
	if err := store.ReadModelScan(projections.RMFilter, nil, nil, false, func(k, _ []byte) (bool, error) {
		keys = append(keys, string(k))
		return true, nil
	}); err != nil {
		t.Fatal(err)
	}
	return keys
}

// TestTombstoneFilterSegmentsAreReadModelRows: on a generated history
// whose expired keys fill the filter's first segments, the first start
// writes the full segments as rows of the read model; a start from a
// snapshot (which leaves them out) reads them back, to the same
// projections; verify compares the rows with a replay's and refuses a
// changed one; and a node whose rows are gone still starts, its
// projections reporting the segment they could not read.
func TestTombstoneFilterSegmentsAreReadModelRows(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "h")
	end := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	// 6,000 tasks at 1,000 a day: those of the first three days have left
	// the 72 h retention, several records each (over 4,096 tombstones).
	if _, err := bench.GenerateHistory(bench.HistoryConfig{Dir: dir, Finished: 6000, Devices: 4, PerDay: 1000, End: end}); err != nil {
		t.Fatal(err)
	}
	clock := commands.NewManualClock(end.Add(time.Second))
	open := func() *node.Node {
		t.Helper()
		n, err := node.Open(node.Config{DataDir: dir, Commands: commands.DefaultConfig(), Logger: zerolog.Nop(), Clock: clock})
		if err != nil {
			t.Fatal(err)
		}
		return n
	}
	canonical := func(n *node.Node) ([]byte, error) {
		var b []byte
		var err error
		n.Engine.Read(func(s *projections.State) { b, err = s.Canonical() })
		return b, err
	}

	n := open() // the whole log replayed: the rebuild writes the rows
	rows := filterRowKeys(t, n.Store)
	if len(rows) == 0 {
		t.Fatal("no filter rows after the first start: the history filled no segment")
	}
	if _, err := n.Snapshot(); err != nil {
		t.Fatal(err)
	}
	want, err := canonical(n)
	if err != nil {
		t.Fatal(err)
	}
	n.Close()

	n = open()
	if n.Loaded.Snapshot == nil {
		t.Fatalf("start-up loaded %+v, want the snapshot", n.Loaded)
	}
	if got, err := canonical(n); err != nil || !bytes.Equal(got, want) {
		t.Fatalf("started from the snapshot, the projections differ (%v)", err)
	}
	n.Close()

	cfg := retentionCfg()
	store := openVerified(t, dir, cfg)
	ws := changed(t, store, projections.RMFilter, rows[0], bytes.Repeat([]byte{0xff}, 8*1024))
	if err := store.ResetReadModel(ws); err != nil {
		t.Fatal(err)
	}
	if _, err := node.Verify(store, cfg, nil); err == nil || !strings.Contains(err.Error(), projections.RMFilter) {
		t.Fatalf("verify after a filter row changed: %v, want a violation naming %s", err, projections.RMFilter)
	}
	var kept []ledger.ReadModelWrite
	for _, w := range changed(t, store, projections.RMFilter, rows[0], nil) {
		if w.Bucket != projections.RMFilter {
			kept = append(kept, w)
		}
	}
	if err := store.ResetReadModel(kept); err != nil {
		t.Fatal(err)
	}
	store.Close()

	n = open() // the read model is current (its head and version), its filter rows gone
	defer n.Close()
	if n.Loaded.Snapshot == nil {
		t.Fatalf("start-up loaded %+v, want the snapshot", n.Loaded)
	}
	if _, err := canonical(n); err == nil || !strings.Contains(err.Error(), "tombstone filter segment 0") {
		t.Fatalf("canonical bytes without the filter rows: %v, want segment 0 named", err)
	}
}
