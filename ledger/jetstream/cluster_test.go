package jetstream_test

import (
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"

	"taskledger/ledger"
	"taskledger/ledger/jetstream"
	"taskledger/ledger/jetstream/jstest"
	"taskledger/ledger/ledgertest"
)

// TestClusterR3SurvivesTheLossOfOneServer appends on an R3 stream through
// two writers on different servers (exactly one wins each race), shuts the
// stream's leader down, and checks that the log, whole, keeps accepting
// appends at the head through the two servers left.
func TestClusterR3SurvivesTheLossOfOneServer(t *testing.T) {
	servers := jstest.Cluster(t)
	var urls []string
	for _, s := range servers {
		urls = append(urls, s.ClientURL())
	}
	open := func(url string) *jetstream.Log {
		t.Helper()
		var l *jetstream.Log
		jstest.Eventually(t, 15*time.Second, "open R3 log", func() error {
			var err error
			l, err = jetstream.Open(jetstream.Config{URL: url, Name: "R3", Replicas: 3, Timeout: 2 * time.Second})
			return err
		})
		t.Cleanup(func() { l.Close() })
		return l
	}
	a, b := open(urls[0]), open(urls[1]+","+urls[2])
	head := ledger.GenesisHead()
	var want []*ledger.Event
	for round := 0; round < 3; round++ {
		ea, _ := ledgertest.Events(t, head, 2, map[string]uint64{}, "task/a")
		eb, _ := ledgertest.Events(t, head, 3, map[string]uint64{}, "task/b")
		errs := make(chan error, 2)
		go func() { errs <- a.Append(&ledger.Batch{Expected: head, Events: ea}) }()
		go func() { errs <- b.Append(&ledger.Batch{Expected: head, Events: eb}) }()
		e1, e2 := <-errs, <-errs
		wins := 0
		for _, err := range []error{e1, e2} {
			if err == nil {
				wins++
			} else if !errors.Is(err, ledger.ErrHeadMoved) {
				t.Fatalf("round %d: %v", round, err)
			}
		}
		if wins != 1 {
			t.Fatalf("round %d: %d writers won at the same head on R3, want 1", round, wins)
		}
		h, err := a.Head()
		if err != nil {
			t.Fatal(err)
		}
		if h.Seq == head.Seq+2 {
			want = append(want, ea...)
		} else {
			want = append(want, eb...)
		}
		head = h
	}
	// Shut the stream's leader down (not the server a is connected to: a
	// keeps its one URL; b reconnects to the other).
	leader := -1
	jstest.Eventually(t, 10*time.Second, "stream leader", func() error {
		for i, s := range servers {
			if s.JetStreamIsStreamLeader(server.DEFAULT_GLOBAL_ACCOUNT, "R3_EVENTS") {
				leader = i
				return nil
			}
		}
		return errors.New("no stream leader")
	})
	writer := b
	if leader != 0 {
		writer = a
	}
	servers[leader].Shutdown()
	servers[leader].WaitForShutdown()
	more, next := ledgertest.Events(t, head, 2, map[string]uint64{}, "task/c")
	jstest.Eventually(t, 20*time.Second, "append after the leader's loss", func() error {
		err := writer.Append(&ledger.Batch{Expected: head, Events: more})
		if errors.Is(err, ledger.ErrHeadMoved) {
			// An earlier try was stored and its answer lost: the head is ours.
			if h, herr := writer.Head(); herr == nil && h.Seq == next.Seq && string(h.Hash) == string(next.Hash) {
				return nil
			}
		}
		return err
	})
	want = append(want, more...)
	var got []*ledger.Event
	if err := writer.Range(0, func(e *ledger.Event) error { c := *e; got = append(got, &c); return nil }); err != nil {
		t.Fatal(err)
	}
	if len(got) != len(want) {
		t.Fatalf("after the leader's loss the log holds %d events, want %d", len(got), len(want))
	}
	for i := range want {
		if string(got[i].Hash) != string(want[i].Hash) {
			t.Fatalf("seq %d differs after the leader's loss", want[i].Seq)
		}
	}
}

// TestClusterR3Conformance runs the backend conformance suite on R3
// streams of a three-server cluster, each backend connected to another
// server.
func TestClusterR3Conformance(t *testing.T) {
	servers := jstest.Cluster(t)
	next := 0
	ledgertest.Run(t, ledgertest.Harness{Shared: true, New: func(t *testing.T) func() (ledger.Backend, error) {
		name := fmt.Sprintf("C%d", names.Add(1))
		return func() (ledger.Backend, error) {
			url := servers[next%len(servers)].ClientURL()
			next++
			var l *jetstream.Log
			var err error
			jstest.Eventually(t, 15*time.Second, "open R3 log", func() error {
				l, err = jetstream.Open(jetstream.Config{URL: url, Name: name, Replicas: 3, Timeout: 3 * time.Second})
				return err
			})
			return l, err
		}
	}})
}
