package jetstream_test

import (
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"

	"taskledger/ledger"
	"taskledger/ledger/jetstream"
	"taskledger/ledger/ledgertest"
)

// MustServer starts an embedded JetStream server on a loopback random
// port with its store in a temporary directory, shut down at cleanup.
func MustServer(t testing.TB) *server.Server {
	t.Helper()
	s, err := server.NewServer(&server.Options{
		Host: "127.0.0.1", Port: server.RANDOM_PORT, NoLog: true, NoSigs: true,
		JetStream: true, StoreDir: t.TempDir(),
	})
	if err != nil {
		t.Fatal(err)
	}
	s.Start()
	if !s.ReadyForConnections(10 * time.Second) {
		s.Shutdown()
		t.Fatal("embedded NATS server did not start")
	}
	t.Cleanup(func() {
		s.Shutdown()
		s.WaitForShutdown()
	})
	return s
}

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
	s := MustServer(t)
	ledgertest.Run(t, harness(t, s.ClientURL()))
}

// TestBlobsConformance runs the blob store conformance tests on the
// object store of an embedded server.
func TestBlobsConformance(t *testing.T) {
	s := MustServer(t)
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
