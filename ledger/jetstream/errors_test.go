package jetstream_test

import (
	"errors"
	"strings"
	"testing"

	"github.com/nats-io/nats.go"
	natsjs "github.com/nats-io/nats.go/jetstream"

	"taskledger/ledger"
	"taskledger/ledger/jetstream"
	"taskledger/ledger/jetstream/jstest"
	"taskledger/ledger/ledgertest"
)

func mustConn(t *testing.T, url string) *nats.Conn {
	t.Helper()
	nc, err := nats.Connect(url)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(nc.Close)
	return nc
}

func TestBatchLargerThanMaxPayloadIsRefused(t *testing.T) {
	s := jstest.Server(t, false)
	l, err := jetstream.Open(jetstream.Config{URL: s.ClientURL(), Name: "BIG"})
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	evs, _ := ledgertest.Events(t, ledger.GenesisHead(), 1, map[string]uint64{})
	evs[0].Body, _ = ledger.Marshal(strings.Repeat("x", 2<<20)) // beyond the default 1 MiB
	evs[0].Seq = 0
	if _, err := ledger.Seal(evs[0], ledger.GenesisHead()); err != nil {
		t.Fatal(err)
	}
	err = l.Append(&ledger.Batch{Expected: ledger.GenesisHead(), Events: evs})
	if !errors.Is(err, jetstream.ErrBatchTooLarge) {
		t.Fatalf("a 2 MiB batch: %v, want ErrBatchTooLarge", err)
	}
	if h, _ := l.Head(); h.Seq != 0 {
		t.Fatalf("head moved to %d", h.Seq)
	}
}

func TestStreamThatAllowsDeleteIsRefused(t *testing.T) {
	s := jstest.Server(t, false)
	js, err := natsjs.New(mustConn(t, s.ClientURL()))
	if err != nil {
		t.Fatal(err)
	}
	ctx := t.Context()
	if _, err := js.CreateStream(ctx, natsjs.StreamConfig{Name: "LAX_EVENTS", Subjects: []string{"lax.events"}, Storage: natsjs.FileStorage}); err != nil {
		t.Fatal(err)
	}
	_, err = jetstream.Open(jetstream.Config{URL: s.ClientURL(), Name: "LAX"})
	if !errors.Is(err, jetstream.ErrStreamConfig) {
		t.Fatalf("open over a stream that allows delete: %v, want ErrStreamConfig", err)
	}
}

func TestForeignMessageInTheStreamIsCorrupt(t *testing.T) {
	s := jstest.Server(t, false)
	l, err := jetstream.Open(jetstream.Config{URL: s.ClientURL(), Name: "FOREIGN"})
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	evs, head := ledgertest.Events(t, ledger.GenesisHead(), 2, map[string]uint64{})
	if err := l.Append(&ledger.Batch{Expected: ledger.GenesisHead(), Events: evs}); err != nil {
		t.Fatal(err)
	}
	js, err := natsjs.New(mustConn(t, s.ClientURL()))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := js.Publish(t.Context(), "foreign.events", []byte("not a batch")); err != nil {
		t.Fatal(err)
	}
	if _, err := l.Head(); !errors.Is(err, jetstream.ErrMessage) {
		t.Fatalf("head over a foreign message: %v, want ErrMessage", err)
	}
	if _, err := jetstream.Open(jetstream.Config{URL: s.ClientURL(), Name: "FOREIGN"}); !errors.Is(err, jetstream.ErrMessage) {
		t.Fatalf("open over a foreign message: %v, want ErrMessage", err)
	}
	more, _ := ledgertest.Events(t, head, 1, map[string]uint64{"task/a": 2})
	if err := l.Append(&ledger.Batch{Expected: head, Events: more}); err == nil {
		t.Fatal("append on top of a foreign message succeeded")
	}
}

func TestClosedLogRefuses(t *testing.T) {
	s := jstest.Server(t, false)
	l, err := jetstream.Open(jetstream.Config{URL: s.ClientURL(), Name: "CLOSED"})
	if err != nil {
		t.Fatal(err)
	}
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	if err := l.Close(); !errors.Is(err, ledger.ErrClosed) {
		t.Fatalf("second close: %v", err)
	}
	if _, err := l.Head(); !errors.Is(err, ledger.ErrClosed) {
		t.Fatalf("head after close: %v", err)
	}
	evs, _ := ledgertest.Events(t, ledger.GenesisHead(), 1, map[string]uint64{})
	if err := l.Append(&ledger.Batch{Expected: ledger.GenesisHead(), Events: evs}); !errors.Is(err, ledger.ErrClosed) {
		t.Fatalf("append after close: %v", err)
	}
}

func TestOpenWithoutServerFails(t *testing.T) {
	s := jstest.Server(t, false)
	url := s.ClientURL()
	s.Shutdown()
	s.WaitForShutdown()
	if _, err := jetstream.Open(jetstream.Config{URL: url}); err == nil {
		t.Fatal("open without a server succeeded")
	}
}

func TestBlobUnderAnotherNameIsDamaged(t *testing.T) {
	s := jstest.Server(t, false)
	l, err := jetstream.Open(jetstream.Config{URL: s.ClientURL(), Name: "DMG"})
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	b, err := l.Blobs()
	if err != nil {
		t.Fatal(err)
	}
	sha, err := b.Put([]byte("the original"))
	if err != nil {
		t.Fatal(err)
	}
	js, err := natsjs.New(mustConn(t, s.ClientURL()))
	if err != nil {
		t.Fatal(err)
	}
	obs, err := js.ObjectStore(t.Context(), "DMG_BLOBS")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := obs.PutBytes(t.Context(), sha, []byte("a replacement")); err != nil {
		t.Fatal(err)
	}
	if _, err := b.Get(sha); !errors.Is(err, ledger.ErrBlobDamaged) {
		t.Fatalf("a blob that does not hash to its name: %v, want ErrBlobDamaged", err)
	}
}
