package node_test

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"taskledger/bench"
	"taskledger/commands"
	"taskledger/ledger"
	"taskledger/node"
	"taskledger/node/nodetest"
	"taskledger/projections"
)

// filterHistory generates a history whose expired keys fill the
// tombstone filter's first segments and returns its directory and a
// function that opens a node on it (a manual clock just after the
// history's end).
func filterHistory(t *testing.T) (dir string, open func() *node.Node) {
	t.Helper()
	dir = filepath.Join(t.TempDir(), "h")
	end := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	// 6,000 tasks at 1,000 a day: those of the first three days have left
	// the 72 h retention, several records each (over 4,096 tombstones).
	if _, err := bench.GenerateHistory(bench.HistoryConfig{Dir: dir, Finished: 6000, Devices: 4, PerDay: 1000, End: end}); err != nil {
		t.Fatal(err)
	}
	clock := commands.NewManualClock(end.Add(time.Second))
	return dir, func() *node.Node {
		t.Helper()
		n, err := node.Open(node.Config{DataDir: dir, Commands: commands.DefaultConfig(), Logger: zerolog.Nop(), Clock: clock})
		if err != nil {
			t.Fatal(err)
		}
		return n
	}
}

// canonicalOf is the canonical bytes of n's projections, or why they
// cannot be made.
func canonicalOf(n *node.Node) ([]byte, error) {
	var b []byte
	var err error
	n.Engine.Read(func(s *projections.State) { b, err = s.Canonical() })
	return b, err
}

// TestTombstoneFilterSegmentsAreReadModelRows: on a generated history
// whose expired keys fill the filter's first segments, the first start
// writes the full segments as rows of the read model; a start from a
// snapshot (which leaves them out) reads them back, to the same
// projections; verify compares the rows with a replay's and refuses a
// changed one; and a node whose rows are gone still starts, its
// projections reporting the segment they could not read.
func TestTombstoneFilterSegmentsAreReadModelRows(t *testing.T) {
	dir, open := filterHistory(t)

	n := open() // the whole log replayed: the rebuild writes the rows
	rows := bucketKeys(t, n.Store, projections.RMFilter)
	if len(rows) == 0 {
		t.Fatal("no filter rows after the first start: the history filled no segment")
	}
	if _, err := n.Snapshot(); err != nil {
		t.Fatal(err)
	}
	want, err := canonicalOf(n)
	if err != nil {
		t.Fatal(err)
	}
	n.Close()

	n = open()
	if n.Loaded.Snapshot == nil {
		t.Fatalf("start-up loaded %+v, want the snapshot", n.Loaded)
	}
	if got, err := canonicalOf(n); err != nil || !bytes.Equal(got, want) {
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
	if _, err := canonicalOf(n); err == nil || !strings.Contains(err.Error(), "tombstone filter segment 0") {
		t.Fatalf("canonical bytes without the filter rows: %v, want segment 0 named", err)
	}
}

// TestALiveBatchThatFillsAFilterSegmentWritesItsRows: a running node whose
// expiries fill the filter's first segment writes the segment's rows in
// that batch's commit (no rebuild involved); a restart from a snapshot
// taken after it reads them back, and a key that expired before the
// restart is still refused as expired. The cleanup compares
// the rows with a replay's.
func TestALiveBatchThatFillsAFilterSegmentWritesItsRows(t *testing.T) {
	n := nodetest.Start(t)
	const tasks = 4200 // more than the first segment's 4,096 keys
	sum := sha256.Sum256([]byte(`{"i":1}`))
	payloadSHA := hex.EncodeToString(sum[:])
	keys := make([]string, tasks)
	for i := range keys {
		keys[i] = nodetest.NewKey()
	}
	var wg sync.WaitGroup
	errs := make(chan string, tasks)
	const workers = 64 // through the sequencer, in parallel: batches of many creates
	for w := range workers {
		wg.Go(func() {
			for i := w; i < tasks; i += workers {
				fp := sha256.Sum256([]byte(keys[i]))
				_, err := n.Engine.Do(context.Background(), &commands.CreateTask{AdminReq: commands.AdminReq{Key: keys[i], Fingerprint: fp[:]},
					Payload: `{"i":1}`, PayloadSHA256: payloadSHA})
				if err != nil {
					errs <- fmt.Sprintf("create %d: %v", i, err)
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	for e := range errs {
		t.Fatal(e)
	}
	if rows := bucketKeys(t, n.Store, projections.RMFilter); len(rows) != 0 {
		t.Fatalf("%d filter rows before any key expired", len(rows))
	}
	for range 4 { // 96 h: past the 72 h retention (a day per advance at most)
		n.Advance(24 * time.Hour)
	}
	n.CreateTask(nil) // its event expires every record before it
	if rows := bucketKeys(t, n.Store, projections.RMFilter); len(rows) == 0 {
		t.Fatal("no filter rows after the batch that expired 4,200 keys")
	}
	if _, err := n.Snapshot(); err != nil {
		t.Fatal(err)
	}
	n2 := n.Restart()
	if n2.Loaded.Snapshot == nil {
		t.Fatalf("start-up loaded %+v, want the snapshot", n2.Loaded)
	}
	fp := sha256.Sum256([]byte(keys[0]))
	_, err := n2.Engine.Do(context.Background(), &commands.CreateTask{AdminReq: commands.AdminReq{Key: keys[0], Fingerprint: fp[:]},
		Payload: `{"i":1}`, PayloadSHA256: payloadSHA})
	if !errors.Is(err, commands.ErrIdempotencyKeyExpired) {
		t.Fatalf("a replay of a key expired before the restart: %v, want %v", err, commands.ErrIdempotencyKeyExpired)
	}
}

// TestAStartTakesTheFilterRowsItReadAheadOnlyFromACurrentReadModel: a
// start from a snapshot reads the filter's full segments beside its load
// and hands them to the projections; a start whose read model is not
// current (here its version changed, and with it a segment's row to bits
// of the right size but wrong) drops what it read ahead, rebuilds the
// read model and reads the rebuilt rows, to the same projections.
func TestAStartTakesTheFilterRowsItReadAheadOnlyFromACurrentReadModel(t *testing.T) {
	dir, open := filterHistory(t)
	mustCanonical := func(n *node.Node) []byte {
		t.Helper()
		b, err := canonicalOf(n)
		if err != nil {
			t.Fatal(err)
		}
		return b
	}

	n := open()
	if n.Started.FilterAheadSegments != 0 {
		t.Fatalf("the first start (read model written by its replay) took %d segments read ahead, want none", n.Started.FilterAheadSegments)
	}
	rows := bucketKeys(t, n.Store, projections.RMFilter)
	segments := 0
	for _, k := range rows {
		if strings.HasSuffix(k, "\x00\x00\x00\x00") { // chunk 0 of a segment
			segments++
		}
	}
	if segments == 0 {
		t.Fatal("no filter rows after the first start: the history filled no segment")
	}
	if _, err := n.Snapshot(); err != nil {
		t.Fatal(err)
	}
	want := mustCanonical(n)
	n.Close()

	n = open()
	if n.Loaded.Snapshot == nil || n.Started.FilterAheadSegments != segments {
		t.Fatalf("start from the snapshot (%v) took %d segments read ahead, want all %d", n.Loaded.Snapshot != nil, n.Started.FilterAheadSegments, segments)
	}
	if !bytes.Equal(mustCanonical(n), want) {
		t.Fatal("started with the segments read ahead, the projections differ")
	}
	n.Close()

	store, err := ledger.Open(dir, ledger.Options{})
	if err != nil {
		t.Fatal(err)
	}
	orig, err := store.ReadModelGet(projections.RMFilter, []byte(rows[0]))
	if err != nil || len(orig) == 0 {
		t.Fatalf("row %x: %d bytes, %v", rows[0], len(orig), err)
	}
	ws := changed(t, store, projections.RMFilter, rows[0], bytes.Repeat([]byte{0xff}, len(orig)))
	for i, w := range ws {
		if w.Bucket == projections.RMMeta && bytes.Equal(w.Key, projections.RMVersionKey()) {
			ws[i].Value = []byte("an older layout")
		}
	}
	if err := store.ResetReadModel(ws); err != nil {
		t.Fatal(err)
	}
	store.Close()

	n = open()
	defer n.Close()
	if n.Loaded.Snapshot == nil || n.Started.FilterAheadSegments != 0 {
		t.Fatalf("start with a stale read model (from the snapshot: %v) took %d segments read ahead, want none", n.Loaded.Snapshot != nil, n.Started.FilterAheadSegments)
	}
	if !bytes.Equal(mustCanonical(n), want) {
		t.Fatal("started after the read model's rebuild, the projections differ")
	}
	if got, err := n.Store.ReadModelGet(projections.RMFilter, []byte(rows[0])); err != nil || !bytes.Equal(got, orig) {
		t.Fatalf("the rebuilt row differs from the one written first (%v)", err)
	}
}
