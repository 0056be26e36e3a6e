package main_test

import (
	"context"
	"net/http"
	"strings"
	"testing"
	"time"

	"taskledger/commands"
	"taskledger/ledger"
	"taskledger/node/nodetest"
	"taskledger/node/nodetest/proc"
	"taskledger/projections"
)

// `taskledger verify` passes on a ledger whose soft idempotency records
// were partly collected ("no task" answers and quiet heartbeats, some
// expired and deleted, some kept), and fails, naming the soft records,
// when one of them is damaged.
func TestVerifyAfterSoftRecordCollection(t *testing.T) {
	retention := nodetest.WithConfig(func(c *commands.Config) { c.IdempotencyRetention = time.Hour })
	n := nodetest.Start(t, retention)
	idle, worker := n.RegisterDevice(), n.RegisterDevice()
	run := n.StartTask(t, worker, nil)
	nodetest.Must(t, run.Beat("working"), http.StatusOK)
	for range 3 {
		nodetest.Must(t, run.Beat("working"), http.StatusOK)
		nodetest.Must(t, idle.Ready(), http.StatusOK)
		r, _ := idle.Claim()
		nodetest.Must(t, r, http.StatusNoContent)
	}
	n.Advance(time.Hour)
	if got, err := n.CollectSoft(context.Background()); err != nil || got != 6 {
		t.Fatalf("collected %d, %v; want the 6 expired records", got, err)
	}
	nodetest.Must(t, idle.Ready(), http.StatusOK)
	r, _ := idle.Claim()
	nodetest.Must(t, r, http.StatusNoContent) // one record kept
	n.Close()

	if r := proc.CLI(t, "verify", "--data", n.Dir, "--idempotency-retention", "1h"); r.Code != 0 {
		t.Fatalf("verify: exit %d\n%s%s", r.Code, r.Stdout, r.Stderr)
	}

	// Damage the kept record: verify refuses it.
	store, err := ledger.Open(n.Dir, ledger.Options{})
	if err != nil {
		t.Fatal(err)
	}
	var key string
	err = store.SoftRecords(projections.SoftIdemAtPrefix, func(k string, _ []byte) error { key = k; return nil })
	if err == nil {
		err = store.Append(&ledger.Batch{Expected: mustHead(t, store), Soft: []ledger.SoftRecord{{Key: key, Value: []byte{1, 3}}}})
	}
	store.Close()
	if err != nil || key == "" {
		t.Fatalf("damaging the soft record %q: %v", key, err)
	}
	if r := proc.CLI(t, "verify", "--data", n.Dir, "--idempotency-retention", "1h"); r.Code != 1 || !strings.Contains(r.Stderr, "soft") {
		t.Fatalf("verify of a damaged soft record: exit %d\n%s", r.Code, r.Stderr)
	}
}

func mustHead(t testing.TB, s *ledger.Store) ledger.Head {
	t.Helper()
	h, err := s.Head()
	if err != nil {
		t.Fatal(err)
	}
	return h
}
