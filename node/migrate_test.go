package node_test

import (
	"bytes"
	"errors"
	"testing"

	"taskledger/commands"
	"taskledger/ledger"
	"taskledger/ledger/jetstream"
	"taskledger/node"
	"taskledger/node/nodetest"
	"taskledger/projections"
	"taskledger/snapshots"
)

// The JetStream log is what the sequencer, snapshots and rebuilds read and
// write through.
var (
	_ commands.Log       = (*jetstream.Log)(nil)
	_ snapshots.Log      = (*jetstream.Log)(nil)
	_ projections.Source = (*jetstream.Log)(nil)
)

// smallLedger writes a ledger with a device, its presence and a claimed
// task, and returns its directory (closed).
func smallLedger(t *testing.T) string {
	n := nodetest.Start(t)
	d := n.RegisterDevice()
	if r := d.Ready(); r.Status != 200 {
		t.Fatalf("presence: %d %s", r.Status, r.Body)
	}
	n.CreateTask(nil)
	if r, _ := d.Claim(); r.Status != 200 {
		t.Fatalf("claim: %d %s", r.Status, r.Body)
	}
	n.Close()
	return n.Dir
}

func TestMigrateCopiesEveryEventAndRecord(t *testing.T) {
	src, err := ledger.Open(smallLedger(t), ledger.Options{ReadOnly: true})
	if err != nil {
		t.Fatal(err)
	}
	defer src.Close()
	dst, err := ledger.Open(t.TempDir(), ledger.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer dst.Close()
	rep, err := node.Migrate(src, dst, projections.Config{})
	if err != nil {
		t.Fatal(err)
	}
	want, _ := src.Head()
	if rep.Head.Seq != want.Seq || !bytes.Equal(rep.Head.Hash, want.Hash) || rep.Events != want.Seq {
		t.Fatalf("copy head %d (%d events), source %d", rep.Head.Seq, rep.Events, want.Seq)
	}
	var a, b [][]byte
	_ = src.RangeRaw(0, func(_ uint64, raw []byte) error { a = append(a, bytes.Clone(raw)); return nil })
	_ = dst.RangeRaw(0, func(_ uint64, raw []byte) error { b = append(b, bytes.Clone(raw)); return nil })
	if len(a) != len(b) {
		t.Fatalf("copied %d events of %d", len(b), len(a))
	}
	for i := range a {
		if !bytes.Equal(a[i], b[i]) {
			t.Fatalf("seq %d: stored bytes differ", i+1)
		}
	}
	srcSt, _ := projections.Rebuild(src, projections.Config{})
	dstSt, _ := projections.Rebuild(dst, projections.Config{})
	x, _ := srcSt.CanonicalWithSoft()
	y, _ := dstSt.CanonicalWithSoft()
	if !bytes.Equal(x, y) {
		t.Fatal("the copy's projections (with soft records) differ from the source's")
	}
	st, _ := src.AdminTokens()
	dt, _ := dst.AdminTokens()
	if len(st) == 0 || len(dt) != len(st) {
		t.Fatalf("admin tokens: source %d, copy %d", len(st), len(dt))
	}
	// Into a target that is not empty: refused, nothing written.
	if _, err := node.Migrate(src, dst, projections.Config{}); !errors.Is(err, node.ErrNotEmpty) {
		t.Fatalf("second migrate: %v, want ErrNotEmpty", err)
	}
	if h, _ := dst.Head(); h.Seq != want.Seq {
		t.Fatalf("refused migrate moved the head to %d", h.Seq)
	}
}

func TestVerifyBackendFindsABrokenChain(t *testing.T) {
	dst, err := ledger.Open(t.TempDir(), ledger.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer dst.Close()
	e := &ledger.Event{Stream: "task/x", StreamVersion: 1, Type: "task.created", Schema: 1, At: 1,
		Actor: ledger.Actor{Kind: ledger.ActorSystem, ID: "t"}, Body: []byte{0x80}}
	if _, err := ledger.Seal(e, ledger.GenesisHead()); err != nil {
		t.Fatal(err)
	}
	e.At = 2 // after sealing: the hash no longer matches
	if err := dst.Append(&ledger.Batch{Expected: ledger.GenesisHead(), Events: []*ledger.Event{e}}); err != nil {
		t.Fatal(err)
	}
	_, err = node.VerifyBackend(dst, projections.Config{})
	var v *node.Violation
	if !errors.As(err, &v) || v.Seq != 1 {
		t.Fatalf("verify of a tampered event: %v, want a violation at seq 1", err)
	}
}
