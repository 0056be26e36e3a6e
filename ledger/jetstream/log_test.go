package jetstream_test

import (
	"fmt"
	"sync/atomic"
	"testing"

	"taskledger/ledger"
	"taskledger/ledger/jetstream"
	"taskledger/ledger/jetstream/jstest"
	"taskledger/ledger/ledgertest"
)

var names atomic.Int64

// harness gives each test its own stream and buckets on one server.
func harness(t *testing.T, url string) ledgertest.Harness {
	return ledgertest.Harness{Shared: true, New: func(t *testing.T) func() (ledger.Backend, error) {
		name := fmt.Sprintf("T%d", names.Add(1))
		return func() (ledger.Backend, error) {
			return jetstream.Open(jetstream.Config{URL: url, Name: name})
		}
	}}
}

// TestLogConformance runs the backend conformance suite on a JetStream
// stream (R1, file storage) of an embedded server.
func TestLogConformance(t *testing.T) {
	s := jstest.Server(t, false)
	ledgertest.Run(t, harness(t, s.ClientURL()))
}

// TestBlobsConformance runs the blob store conformance tests on the
// object store of an embedded server.
func TestBlobsConformance(t *testing.T) {
	s := jstest.Server(t, false)
	ledgertest.RunBlobs(t, func(t *testing.T) ledger.BlobStore {
		l, err := jetstream.Open(jetstream.Config{URL: s.ClientURL(), Name: "BLOBS"})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { l.Close() })
		b, err := l.Blobs()
		if err != nil {
			t.Fatal(err)
		}
		return b
	})
}

// TestManyBatchesReadThroughTheConsumer appends more batches than a read
// fetches one by one, and reads them back from a reopened log (Open, Range
// from inside, Stream).
func TestManyBatchesReadThroughTheConsumer(t *testing.T) {
	s := jstest.Server(t, false)
	open := func() *jetstream.Log {
		l, err := jetstream.Open(jetstream.Config{URL: s.ClientURL(), Name: "MANY"})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { l.Close() })
		return l
	}
	w := open()
	v := map[string]uint64{}
	head := ledger.GenesisHead()
	const batches = 300 // beyond one fetch of the consumer
	for i := 0; i < batches; i++ {
		evs, next := ledgertest.Events(t, head, 1+i%3, v, "task/a", "task/b")
		if err := w.Append(&ledger.Batch{Expected: head, Events: evs}); err != nil {
			t.Fatal(err)
		}
		head = next
	}
	r := open()
	if h, err := r.Head(); err != nil || h.Seq != head.Seq {
		t.Fatalf("reopened head %d (%v), want %d", h.Seq, err, head.Seq)
	}
	want := head.Seq - 100
	n := uint64(0)
	if err := r.Range(100, func(e *ledger.Event) error {
		n++
		if e.Seq != 100+n {
			return fmt.Errorf("seq %d at position %d", e.Seq, n)
		}
		return nil
	}); err != nil || n != want {
		t.Fatalf("Range(100): %d events (%v), want %d", n, err, want)
	}
	got := uint64(0)
	if err := r.Stream("task/b", func(e *ledger.Event) error { got++; return nil }); err != nil || got != v["task/b"] {
		t.Fatalf("stream task/b: %d (%v), want %d", got, err, v["task/b"])
	}
}

// TestBatchAlreadyStoredIsCommitted: a writer whose publish is refused
// because the stream already ends with the very same batch (its earlier
// try was stored and the answer lost, or an identical decision) reports it
// committed, and the batch is stored once.
func TestBatchAlreadyStoredIsCommitted(t *testing.T) {
	s := jstest.Server(t, false)
	open := func() *jetstream.Log {
		l, err := jetstream.Open(jetstream.Config{URL: s.ClientURL(), Name: "ONCE"})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { l.Close() })
		return l
	}
	a, b := open(), open()
	evs, head := ledgertest.Events(t, ledger.GenesisHead(), 3, map[string]uint64{})
	if err := a.Append(&ledger.Batch{Expected: ledger.GenesisHead(), Events: evs}); err != nil {
		t.Fatal(err)
	}
	// b has not read a's message: it publishes the same batch at seq 0.
	if err := b.Append(&ledger.Batch{Expected: ledger.GenesisHead(), Events: evs}); err != nil {
		t.Fatalf("the same batch again: %v, want it reported committed", err)
	}
	n := 0
	if err := b.Range(0, func(*ledger.Event) error { n++; return nil }); err != nil || n != 3 {
		t.Fatalf("the log holds %d events (%v), want the batch once (3)", n, err)
	}
	if h, _ := b.Head(); h.Seq != head.Seq {
		t.Fatalf("head %d, want %d", h.Seq, head.Seq)
	}
}

// TestReadsDuringAppendsIndexEachBatchOnce reads the head from other
// goroutines while batches are appended: a batch a read indexes before
// its own Append returns is not indexed twice.
func TestReadsDuringAppendsIndexEachBatchOnce(t *testing.T) {
	s := jstest.Server(t, false)
	l, err := jetstream.Open(jetstream.Config{URL: s.ClientURL(), Name: "READS"})
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	stop := make(chan struct{})
	done := make(chan error, 2)
	for r := 0; r < 2; r++ {
		go func() {
			for {
				select {
				case <-stop:
					done <- nil
					return
				default:
				}
				if _, err := l.Head(); err != nil {
					done <- err
					return
				}
			}
		}()
	}
	v := map[string]uint64{}
	head := ledger.GenesisHead()
	for i := 0; i < 60; i++ {
		evs, next := ledgertest.Events(t, head, 2, v, "task/a")
		if err := l.Append(&ledger.Batch{Expected: head, Events: evs}); err != nil {
			close(stop)
			t.Fatalf("batch %d: %v", i, err)
		}
		head = next
	}
	close(stop)
	for r := 0; r < 2; r++ {
		if err := <-done; err != nil {
			t.Fatalf("reader: %v", err)
		}
	}
	n := 0
	if err := l.Stream("task/a", func(*ledger.Event) error { n++; return nil }); err != nil || n != 120 {
		t.Fatalf("stream holds %d events (%v), want 120", n, err)
	}
}
