package node_test

import (
	"encoding/binary"
	"strings"
	"testing"
	"time"

	"taskledger/commands"
	"taskledger/ledger"
	"taskledger/node"
	"taskledger/node/nodetest"
	"taskledger/projections"
)

// readModelTasks lists the task ids in the read model on disk (the node
// closed or not: bbolt reads are concurrent with the writer).
func readModelTasks(t *testing.T, store *ledger.Store) map[string]*projections.Task {
	t.Helper()
	out := map[string]*projections.Task{}
	err := store.ReadModelScan(projections.RMTasks, nil, nil, false, func(k, v []byte) (bool, error) {
		task, err := projections.DecodeFinishedTask(v)
		if err != nil {
			return false, err
		}
		out[string(k)] = task
		return true, nil
	})
	if err != nil {
		t.Fatalf("read model: %v", err)
	}
	return out
}

// A finished task goes to the read model on disk in the commit whose event
// is newer than its last one by the idempotency retention (its records
// expired), not before; the document is the task as the projections hold
// it. The cleanup compares the read model with a full replay's.
func TestFinishedTaskSettlesToDiskWithTheCommitAfterRetention(t *testing.T) {
	n := nodetest.Start(t, nodetest.WithConfig(func(c *commands.Config) { c.IdempotencyRetention = time.Hour }))
	done := n.CreateTask(nil)
	nodetest.Must(t, n.Cancel(done), 200)
	live := n.CreateTask(nil)
	if got := readModelTasks(t, n.Store); len(got) != 0 {
		t.Fatalf("read model holds %d tasks before any settled", len(got))
	}
	n.Advance(time.Hour)
	if got := readModelTasks(t, n.Store); len(got) != 0 {
		t.Fatalf("an advance of the clock (no event) settled %d tasks", len(got))
	}
	n.CreateTask(nil) // the first event a retention after the cancel
	got := readModelTasks(t, n.Store)
	if len(got) != 1 || got[done] == nil {
		t.Fatalf("read model holds %v, want only %s", got, done)
	}
	if got[done].State != projections.StateCanceled || got[live] != nil {
		t.Fatalf("read model task %s is %s", done, got[done].State)
	}
	head, _ := n.Store.ReadModelGet(projections.RMMeta, projections.RMHeadKey())
	if len(head) != 8 || binary.BigEndian.Uint64(head) != n.Head() {
		t.Fatalf("read model head %x, log head %d", head, n.Head())
	}
	// Index entries: the state index names it in its state.
	var ids []string
	_ = n.Store.ReadModelScan(projections.RMState, []byte("CANCELED\x00"), nil, true, func(k, v []byte) (bool, error) {
		ids = append(ids, string(v))
		return true, nil
	})
	if len(ids) != 1 || ids[0] != done {
		t.Fatalf("state index CANCELED: %v", ids)
	}
	// A restart keeps the read model (it is at the head) and writes on.
	n = n.Restart(nodetest.WithConfig(func(c *commands.Config) { c.IdempotencyRetention = time.Hour }))
	nodetest.Must(t, n.Cancel(live), 200)
	n.Advance(2 * time.Hour)
	n.CreateTask(nil)
	if got := readModelTasks(t, n.Store); len(got) != 2 || got[live] == nil {
		t.Fatalf("after a restart the read model holds %d tasks", len(got))
	}
}

// A read model that is not the one of the loaded projections (another
// retention settles other tasks; a file from before the read model had
// none) is rebuilt from them at start, in one transaction.
func TestReadModelRebuiltAtStartWhenRetentionChanges(t *testing.T) {
	hour := nodetest.WithConfig(func(c *commands.Config) { c.IdempotencyRetention = time.Hour })
	n := nodetest.Start(t, hour)
	a := n.CreateTask(nil)
	nodetest.Must(t, n.Cancel(a), 200)
	n.Advance(2 * time.Hour)
	b := n.CreateTask(nil)
	nodetest.Must(t, n.Cancel(b), 200)
	n.Advance(30 * time.Minute)
	n.CreateTask(nil)
	if got := readModelTasks(t, n.Store); len(got) != 1 || got[a] == nil {
		t.Fatalf("read model with 1h retention: %d tasks", len(got))
	}
	n = n.Restart(nodetest.WithConfig(func(c *commands.Config) { c.IdempotencyRetention = 20 * time.Minute }))
	if got := readModelTasks(t, n.Store); len(got) != 2 || got[b] == nil {
		t.Fatalf("read model rebuilt with 20m retention: %d tasks", len(got))
	}
	n = n.Restart(nodetest.WithConfig(func(c *commands.Config) { c.IdempotencyRetention = 3 * time.Hour }))
	if got := readModelTasks(t, n.Store); len(got) != 0 {
		t.Fatalf("read model rebuilt with 3h retention: %d tasks", len(got))
	}
}

// verify compares the read model with a replay's key by key: a document
// changed on disk is a violation naming the bucket.
func TestVerifyRefusesAChangedReadModel(t *testing.T) {
	n := nodetest.Start(t, nodetest.WithConfig(func(c *commands.Config) { c.IdempotencyRetention = time.Hour }))
	id := n.CreateTask(nil)
	nodetest.Must(t, n.Cancel(id), 200)
	n.Advance(2 * time.Hour)
	n.CreateTask(nil)
	dir := n.Dir
	n.Close()
	store, err := ledger.Open(dir, ledger.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer store.Close()
	cfg := projections.Config{IdempotencyRetentionMs: time.Hour.Milliseconds()}
	if _, err := node.Verify(store, cfg, nil); err != nil {
		t.Fatalf("verify before the change: %v", err)
	}
	doc, _ := store.ReadModelGet(projections.RMTasks, []byte(id))
	doc[len(doc)-1] ^= 1
	if err := store.ResetReadModel(changed(t, store, projections.RMTasks, id, doc)); err != nil {
		t.Fatal(err)
	}
	_, err = node.Verify(store, cfg, nil)
	if err == nil || !strings.Contains(err.Error(), projections.RMTasks) {
		t.Fatalf("verify of a changed read model: %v", err)
	}
}

// changed is the whole read model of store with one value replaced.
func changed(t *testing.T, store *ledger.Store, bucket, key string, value []byte) []ledger.ReadModelWrite {
	t.Helper()
	var ws []ledger.ReadModelWrite
	err := store.ReadModelBuckets(func(b string, k, v []byte) error {
		w := ledger.ReadModelWrite{Bucket: b, Key: append([]byte(nil), k...), Value: append([]byte(nil), v...)}
		if b == bucket && string(k) == key {
			w.Value = value
		}
		ws = append(ws, w)
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return ws
}
