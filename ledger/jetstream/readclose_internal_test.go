package jetstream

import (
	"errors"
	"testing"
	"time"

	natsjs "github.com/nats-io/nats.go/jetstream"

	"taskledger/ledger"
	"taskledger/ledger/jetstream/jstest"
	"taskledger/ledger/ledgertest"
)

// A read through the ordered consumer that the log's Close cuts returns an
// error instead of waiting forever for the consumer to be made again over
// a closed connection: a node that closes while a reload reads the stream
// finishes closing.

// consumerOfAClosedLog is an ordered consumer made while its log was open,
// over enough batches to read through it, and the log closed since.
func consumerOfAClosedLog(t *testing.T) (*Log, natsjs.Consumer, uint64) {
	t.Helper()
	s := jstest.Server(t, false)
	l, err := Open(Config{URL: s.ClientURL(), Name: "CUT"})
	if err != nil {
		t.Fatal(err)
	}
	head, v := ledger.GenesisHead(), map[string]uint64{}
	for range 2 * consumerFrom {
		evs, next := ledgertest.Events(t, head, 1, v, "task/a")
		if err := l.Append(&ledger.Batch{Expected: head, Events: evs}); err != nil {
			t.Fatal(err)
		}
		head = next
	}
	ctx, cancel := l.ctx()
	defer cancel()
	cons, err := l.orderedFrom(ctx, 1)
	if err != nil {
		t.Fatal(err)
	}
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	return l, cons, uint64(2 * consumerFrom)
}

// returns waits for f, and fails the test if it has not returned by a
// bound far beyond the time it takes (the bug was a wait without end).
func returns(t *testing.T, what string, f func() error) error {
	t.Helper()
	done := make(chan error, 1)
	go func() { done <- f() }()
	select {
	case err := <-done:
		return err
	case <-time.After(2 * time.Minute):
		t.Fatalf("%s has not returned after 2 minutes", what)
		return nil
	}
}

func TestAFetchOverAClosedConnectionFails(t *testing.T) {
	_, cons, _ := consumerOfAClosedLog(t)
	err := returns(t, "a fetch over the closed connection", func() error {
		_, err := cons.Fetch(consumerFetch, natsjs.FetchMaxWait(time.Second))
		return err
	})
	if err == nil {
		t.Fatal("a fetch over a closed connection succeeded")
	}
}

func TestAReadOfAClosedLogStopsBeforeFetching(t *testing.T) {
	l, cons, last := consumerOfAClosedLog(t)
	next := uint64(1)
	err := returns(t, "a read of a closed log", func() error {
		return l.consume(cons, &next, last, func(uint64, []byte) error { return nil })
	})
	if !errors.Is(err, ledger.ErrClosed) || next != 1 {
		t.Fatalf("read after close: %v at message %d, want ledger.ErrClosed before the first", err, next)
	}
}
