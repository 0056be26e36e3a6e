package jetstream_test

import (
	"syscall"
	"testing"
	"time"

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

// BenchmarkFollowerReadsTheTail is what a follower does for each batch the
// sequencer appends: a writer appends a batch of 16 events, and another
// Log on the stream reads every event after its last one (Range: a sync
// that reads the new messages and checks their chain, then the events).
// Run with
//
//	go test -run '^$' -bench FollowerReadsTheTail -benchtime 3000x ./ledger/jetstream/
func BenchmarkFollowerReadsTheTail(b *testing.B) {
	srv := jstest.Server(b, false)
	open := func() *jetstream.Log {
		l, err := jetstream.Open(jetstream.Config{URL: srv.ClientURL(), Name: "FOLLOW"})
		if err != nil {
			b.Fatal(err)
		}
		b.Cleanup(func() { l.Close() })
		return l
	}
	w, r := open(), open()
	v := map[string]uint64{}
	head := ledger.GenesisHead()
	read := uint64(0)
	cpu0 := cpuTime()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		b.StopTimer()
		evs, next := ledgertest.Events(b, head, 16, v, "task/a", "task/b", "task/c")
		if err := w.Append(&ledger.Batch{Expected: head, Events: evs}); err != nil {
			b.Fatal(err)
		}
		head = next
		b.StartTimer()
		if err := r.Range(read, func(e *ledger.Event) error { read = e.Seq; return nil }); err != nil {
			b.Fatal(err)
		}
	}
	if read != head.Seq {
		b.Fatalf("read up to %d, want %d", read, head.Seq)
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(16*b.N)/1000, "µs/event")
	b.ReportMetric(float64((cpuTime()-cpu0).Nanoseconds())/float64(16*b.N)/1000, "cpu-µs/event")
}

// cpuTime is the process's CPU time so far (user and system; the embedded
// server's included, and the writer's appends, the same in every run).
func cpuTime() time.Duration {
	var ru syscall.Rusage
	_ = syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
