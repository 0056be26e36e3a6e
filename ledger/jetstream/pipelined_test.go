package jetstream_test

import (
	"errors"
	"testing"

	"taskledger/ledger"
	"taskledger/ledger/jetstream"
	"taskledger/ledger/jetstream/jstest"
	"taskledger/ledger/ledgertest"
)

// TestPipelinedAppendsCommitInOrder starts several batches, each on top of
// the one before it, before awaiting any: all are stored, in order, with
// their soft records, and a reopened log reads them back.
func TestPipelinedAppendsCommitInOrder(t *testing.T) {
	s := jstest.Server(t, false)
	cfg := jetstream.Config{URL: s.ClientURL(), Name: "PIPEOK"}
	l := openLog(t, cfg)
	v := map[string]uint64{}
	head := ledger.GenesisHead()
	var waits []func() error
	var all []*ledger.Event
	for i := 0; i < 5; i++ {
		evs, next := ledgertest.Events(t, head, 2, v, "task/a", "task/b")
		soft := []ledger.SoftRecord{{Key: "presence/d" + string(rune('a'+i)), Value: []byte{byte(i)}}}
		waits = append(waits, l.Start(&ledger.Batch{Expected: head, Events: evs, Soft: soft}))
		head, all = next, append(all, evs...)
	}
	// A batch of soft records only, on top of the pending ones.
	waits = append(waits, l.Start(&ledger.Batch{Expected: head, Soft: []ledger.SoftRecord{{Key: "presence/z", Value: []byte{9}}}}))
	for i, w := range waits {
		if err := w(); err != nil {
			t.Fatalf("batch %d: %v", i, err)
		}
	}
	r := openLog(t, cfg)
	if h, err := r.Head(); err != nil || h.Seq != head.Seq {
		t.Fatalf("reopened head %d (%v), want %d", h.Seq, err, head.Seq)
	}
	var seqs []uint64
	if err := r.Range(0, func(e *ledger.Event) error { seqs = append(seqs, e.Seq); return nil }); err != nil {
		t.Fatal(err)
	}
	if len(seqs) != len(all) || seqs[len(seqs)-1] != all[len(all)-1].Seq {
		t.Fatalf("read back seqs %v, want 1..%d", seqs, len(all))
	}
	soft := map[string]bool{}
	if err := r.SoftRecords("presence/", func(k string, _ []byte) error { soft[k] = true; return nil }); err != nil {
		t.Fatal(err)
	}
	if len(soft) != 6 {
		t.Fatalf("soft records %v, want 6", soft)
	}
}

// TestPipelinedAppendFailsEveryBatchAfterAFailedOne: another writer
// appends at the head batch N was decided on, so the stream refuses N;
// batch N+1, published on top of N before N's answer came, expects the
// sequence N would have got, which the other writer's message now has:
// it must be refused as well (it continues N, not that message), both
// waits fail, and neither batch's events nor soft records are stored.
func TestPipelinedAppendFailsEveryBatchAfterAFailedOne(t *testing.T) {
	s := jstest.Server(t, false)
	cfg := jetstream.Config{URL: s.ClientURL(), Name: "PIPEFAIL"}
	l, other := openLog(t, cfg), openLog(t, cfg)
	v := map[string]uint64{}
	genesis := ledger.GenesisHead()
	theirs, theirHead := ledgertest.Events(t, genesis, 1, v, "task/x")
	v = map[string]uint64{}
	n, nHead := ledgertest.Events(t, genesis, 2, v, "task/a")
	n1, _ := ledgertest.Events(t, nHead, 2, v, "task/a")
	if err := other.Append(&ledger.Batch{Expected: genesis, Events: theirs}); err != nil {
		t.Fatal(err)
	}
	// l has not read the other writer's message: its head is still genesis.
	waitN := l.Start(&ledger.Batch{Expected: genesis, Events: n, Soft: []ledger.SoftRecord{{Key: "n", Value: []byte{1}}}})
	waitN1 := l.Start(&ledger.Batch{Expected: nHead, Events: n1, Soft: []ledger.SoftRecord{{Key: "n1", Value: []byte{1}}}})
	if err := waitN(); !errors.Is(err, ledger.ErrHeadMoved) {
		t.Fatalf("batch N: %v, want ErrHeadMoved", err)
	}
	if err := waitN1(); !errors.Is(err, jetstream.ErrPipelineBroken) {
		t.Fatalf("batch N+1: %v, want ErrPipelineBroken", err)
	}
	r := openLog(t, cfg)
	var got []*ledger.Event
	if err := r.Range(0, func(e *ledger.Event) error { got = append(got, e); return nil }); err != nil {
		t.Fatalf("the stream does not read back as one chain: %v", err)
	}
	if h, _ := r.Head(); len(got) != 1 || h.Seq != theirHead.Seq || string(h.Hash) != string(theirHead.Hash) {
		t.Fatalf("the stream holds %d events (head %d), want only the other writer's", len(got), h.Seq)
	}
	if err := r.SoftRecords("", func(k string, _ []byte) error {
		return errors.New("soft record " + k + " of a failed batch was written")
	}); err != nil {
		t.Fatal(err)
	}
	// The log recovers: a batch on the stream's real head is stored.
	next, _ := ledgertest.Events(t, theirHead, 1, map[string]uint64{"task/x": 1}, "task/x")
	if err := l.Start(&ledger.Batch{Expected: theirHead, Events: next})(); err != nil {
		t.Fatalf("a batch on the real head after the failure: %v", err)
	}
}

func openLog(t *testing.T, cfg jetstream.Config) *jetstream.Log {
	t.Helper()
	l, err := jetstream.Open(cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.Close() })
	return l
}

// TestSoftRecordsOfABatchKeepTheirOrder: a batch's soft records are
// published together; two writes of one key in a batch leave the later
// one, and a delete after a put leaves nothing.
func TestSoftRecordsOfABatchKeepTheirOrder(t *testing.T) {
	s := jstest.Server(t, false)
	cfg := jetstream.Config{URL: s.ClientURL(), Name: "SOFTORDER"}
	l := openLog(t, cfg)
	soft := []ledger.SoftRecord{{Key: "k", Value: []byte("1")}, {Key: "gone", Value: []byte("x")}, {Key: "k", Value: []byte("2")}, {Key: "gone"}}
	if err := l.Append(&ledger.Batch{Expected: ledger.GenesisHead(), Soft: soft}); err != nil {
		t.Fatal(err)
	}
	got := map[string]string{}
	if err := openLog(t, cfg).SoftRecords("", func(k string, v []byte) error { got[k] = string(v); return nil }); err != nil {
		t.Fatal(err)
	}
	if len(got) != 1 || got["k"] != "2" {
		t.Fatalf("soft records %v, want only k=2", got)
	}
}
