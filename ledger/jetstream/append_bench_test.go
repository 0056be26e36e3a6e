package jetstream_test

import (
	"testing"

	"taskledger/ledger"
	"taskledger/ledger/jetstream"
	"taskledger/ledger/jetstream/jstest"
	"taskledger/ledger/ledgertest"
)

// benchAppend appends b.N batches of 16 events to a backend.
func benchAppend(b *testing.B, l ledger.Backend) {
	v := map[string]uint64{}
	head, err := l.Head()
	if err != nil {
		b.Fatal(err)
	}
	batches := make([][]*ledger.Event, b.N)
	for i := range batches {
		batches[i], head = ledgertest.Events(b, head, 16, v, "task/a", "task/b", "task/c")
	}
	b.ResetTimer()
	for i := range batches {
		exp := ledger.GenesisHead()
		if i > 0 {
			last := batches[i-1][15]
			exp = ledger.Head{Seq: last.Seq, Hash: last.Hash, At: last.At}
		}
		if err := l.Append(&ledger.Batch{Expected: exp, Events: batches[i]}); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(16*b.N)/b.Elapsed().Seconds(), "events/s")
}

// BenchmarkAppendBatchOf16 compares one fsynced bbolt transaction with
// one JetStream publish per batch (embedded R1 server, file storage), with
// the server's default sync interval and with sync_interval: always (an
// fsync per write, the bbolt guarantee on one machine).
func BenchmarkAppendBatchOf16(b *testing.B) {
	b.Run("bbolt", func(b *testing.B) {
		s, err := ledger.Open(b.TempDir(), ledger.Options{})
		if err != nil {
			b.Fatal(err)
		}
		defer s.Close()
		benchAppend(b, s)
	})
	b.Run("jetstream-R1", func(b *testing.B) {
		srv := jstest.Server(b, false)
		l, err := jetstream.Open(jetstream.Config{URL: srv.ClientURL(), Name: "BENCH"})
		if err != nil {
			b.Fatal(err)
		}
		defer l.Close()
		benchAppend(b, l)
	})
	b.Run("jetstream-R1-sync-always", func(b *testing.B) {
		srv := jstest.Server(b, true)
		l, err := jetstream.Open(jetstream.Config{URL: srv.ClientURL(), Name: "BENCH"})
		if err != nil {
			b.Fatal(err)
		}
		defer l.Close()
		benchAppend(b, l)
	})
}
