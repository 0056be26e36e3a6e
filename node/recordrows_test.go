package node_test

import (
	"bytes"
	"encoding/binary"
	"strings"
	"testing"

	"taskledger/ledger"
	"taskledger/node"
	"taskledger/node/nodetest"
	"taskledger/projections"
	"taskledger/snapshots"
)

// bucketKeys lists the keys of a read-model bucket, in key order.
func bucketKeys(t *testing.T, store *ledger.Store, bucket string) []string {
	t.Helper()
	var keys []string
	if err := store.ReadModelScan(bucket, nil, nil, false, func(k, _ []byte) (bool, error) {
		keys = append(keys, string(k))
		return true, nil
	}); err != nil {
		t.Fatal(err)
	}
	return keys
}

// recordRows counts the rows of the read model's records bucket.
func recordRows(t *testing.T, store *ledger.Store) int {
	t.Helper()
	return len(bucketKeys(t, store, projections.RMRecords))
}

// TestRecordsNamedBySeqAnswerReplaysAfterARestart: every command's
// record has its row in the read model from the commit that made it; a
// snapshot names the records by seq, not whole (it is smaller than the
// projections' canonical bytes), and after a restart from that snapshot a replay of a
// command recorded before it answers exactly as the first time, from the
// row on disk. The cleanup compares the rows with a full replay's.
func TestRecordsNamedBySeqAnswerReplaysAfterARestart(t *testing.T) {
	n := nodetest.Start(t)
	d := n.RegisterDevice()
	r := n.StartTask(t, d, map[string]any{"w": 1})
	key := nodetest.NewKey()
	body := map[string]any{"claim_generation": 1, "execution_id": r.ExecutionID, "step": "s"}
	first := d.Call(r.TaskID, "heartbeat", r.Token, body, key)
	nodetest.Must(t, first, 200)
	if got := recordRows(t, n.Store); got < 4 { // register, claim, start, heartbeat at least
		t.Fatalf("%d record rows after four recorded commands", got)
	}
	path, err := n.Snapshot()
	if err != nil {
		t.Fatal(err)
	}
	snap, err := snapshots.Read(path)
	if err != nil {
		t.Fatal(err)
	}
	var whole []byte
	n.Engine.Read(func(s *projections.State) { whole, _ = s.Canonical() })
	if len(snap.State) >= len(whole) {
		t.Fatalf("the snapshot's content takes %d bytes, the projections with every record whole %d", len(snap.State), len(whole))
	}

	n2 := n.Restart()
	if n2.Loaded.Snapshot == nil || n2.Loaded.Replayed != 0 {
		t.Fatalf("start-up loaded %+v, want the snapshot and no tail", n2.Loaded)
	}
	d.N = n2
	nodetest.MustReplay(t, first, d.Call(r.TaskID, "heartbeat", r.Token, body, key))
	// The same key with another body conflicts, as it did before the restart.
	body["step"] = "other"
	nodetest.Must(t, d.Call(r.TaskID, "heartbeat", r.Token, body, key), 409)
}

// TestVerifyRefusesAChangedRecordRow: verify compares the records bucket
// with a replay's rows: a row changed on disk, or one left behind, is a
// violation naming the bucket.
func TestVerifyRefusesAChangedRecordRow(t *testing.T) {
	n := nodetest.Start(t)
	n.CreateTask(nil)
	dir := n.Dir
	n.Close()
	cfg := retentionCfg()
	store := openVerified(t, dir, cfg)
	var key, row []byte
	if err := store.ReadModelScan(projections.RMRecords, nil, nil, false, func(k, v []byte) (bool, error) {
		key, row = bytes.Clone(k), bytes.Clone(v)
		return false, nil
	}); err != nil || key == nil {
		t.Fatalf("no record row: %v", err)
	}
	row[len(row)-1] ^= 1
	if err := store.ResetReadModel(changed(t, store, projections.RMRecords, string(key), row)); err != nil {
		t.Fatal(err)
	}
	if _, err := node.Verify(store, cfg, nil); err == nil || !strings.Contains(err.Error(), projections.RMRecords) {
		t.Fatalf("verify of a changed record row: %v", err)
	}
	row[len(row)-1] ^= 1 // back as it was, and a row no record names beside it
	ws := changed(t, store, projections.RMRecords, string(key), row)
	ws = append(ws, ledger.ReadModelWrite{Bucket: projections.RMRecords, Key: binary.BigEndian.AppendUint64(nil, 1<<40), Value: row})
	if err := store.ResetReadModel(ws); err != nil {
		t.Fatal(err)
	}
	if _, err := node.Verify(store, cfg, nil); err == nil || !strings.Contains(err.Error(), projections.RMRecords) {
		t.Fatalf("verify of a read model with a row left behind: %v", err)
	}
}
