package commands

import (
	"bytes"
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"taskledger/ledger"
	"taskledger/ledger/jetstream"
	"taskledger/ledger/jetstream/jstest"
	"taskledger/projections"
)

// interloperLog is a JetStream log on which, just before the first batch
// is started, another sequencer commits at the head that batch was decided
// on (so the stream refuses it); the first batch's wait is held until the
// second batch was started, so both are in flight when the first fails.
type interloperLog struct {
	*jetstream.Log
	interlope func()
	mu        sync.Mutex
	starts    int
	first     chan struct{} // closed once batch N was started
	second    chan struct{} // closed once batch N+1 was started
}

func (l *interloperLog) Start(b *ledger.Batch) func() error {
	l.mu.Lock()
	l.starts++
	k := l.starts
	l.mu.Unlock()
	switch k {
	case 1:
		l.interlope()
		wait := l.Log.Start(b)
		close(l.first)
		return func() error { <-l.second; return wait() }
	case 2:
		wait := l.Log.Start(b)
		close(l.second)
		return wait
	}
	return l.Log.Start(b)
}

func jetstreamEngine(t *testing.T, log Log, src projections.Source) *Engine {
	t.Helper()
	cfg := DefaultConfig()
	pcfg := projections.Config{IdempotencyRetentionMs: cfg.IdempotencyRetention.Milliseconds()}
	e := NewEngine(Options{Log: log, State: projections.New(pcfg), Clock: WallClock{}, Config: cfg, Logger: zerolog.Nop(),
		Load: func() (*projections.State, error) { return projections.Rebuild(src, pcfg) }})
	t.Cleanup(e.Close)
	return e
}

func createTaskCmd() *CreateTask {
	return &CreateTask{AdminReq: AdminReq{Operator: "op", Key: NewID(), Fingerprint: []byte{1}},
		Payload: `{"a":1}`, PayloadSHA256: HashToken(`{"a":1}`), AuthorizeTTL: time.Hour}
}

// TestPipelinedBatchAfterAFailedOneIsNotAcknowledged: on a JetStream
// stream the engine publishes batch N+1 while N's acknowledgement is in
// flight. Another sequencer commits first at the head N was decided on, so
// the stream refuses N; N+1 must fail too, and both commands are answered
// ErrUnavailable: nothing of either is acknowledged or stored. Then the
// engine reloads the stream and goes on on top of the other's event.
func TestPipelinedBatchAfterAFailedOneIsNotAcknowledged(t *testing.T) {
	s := jstest.Server(t, false)
	open := func() *jetstream.Log {
		l, err := jetstream.Open(jetstream.Config{URL: s.ClientURL(), Name: "PIPEENGINE"})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { l.Close() })
		return l
	}
	mine, theirs := open(), open()
	other := jetstreamEngine(t, theirs, theirs)
	il := &interloperLog{Log: mine, first: make(chan struct{}), second: make(chan struct{}), interlope: func() {
		if _, err := other.Do(context.Background(), createTaskCmd()); err != nil {
			t.Errorf("the other sequencer's command: %v", err)
		}
	}}
	e := jetstreamEngine(t, il, mine)
	if e.depth < 2 {
		t.Fatalf("pipeline depth %d on a JetStream log, want ≥ 2", e.depth)
	}
	errs := make(chan error, 2)
	do := func() {
		_, err := e.Do(context.Background(), createTaskCmd())
		errs <- err
	}
	go do()
	<-il.first // batch N is published, its answer held
	go do()    // decided into N+1, published on top of N
	for i := 0; i < 2; i++ {
		if err := <-errs; !errors.Is(err, ErrUnavailable) {
			t.Fatalf("command %d: %v, want ErrUnavailable (its batch or the one before it failed)", i, err)
		}
	}
	h, err := open().Head()
	if err != nil {
		t.Fatal(err)
	}
	if want := other.Head(); h.Seq != want.Seq || string(h.Hash) != string(want.Hash) {
		t.Fatalf("the stream's head is %d, want the other sequencer's %d only", h.Seq, want.Seq)
	}
	// Recovered: the next command is decided on the reloaded stream.
	res, err := e.Do(context.Background(), createTaskCmd())
	if err != nil {
		t.Fatalf("after the failure: %v", err)
	}
	if res.Seq <= h.Seq {
		t.Fatalf("the next command's event is seq %d, want after the stream's %d", res.Seq, h.Seq)
	}
	var tasks int
	e.Read(func(s *projections.State) { tasks = len(s.Tasks) })
	if tasks != 2 {
		t.Fatalf("%d tasks, want 2 (the other sequencer's and the last one)", tasks)
	}
}

// startCounter counts the batches started while another was pending.
type startCounter struct {
	*jetstream.Log
	mu       sync.Mutex
	pending  int
	overlaps int
}

func (c *startCounter) Start(b *ledger.Batch) func() error {
	c.mu.Lock()
	if c.pending > 0 {
		c.overlaps++
	}
	c.pending++
	c.mu.Unlock()
	wait := c.Log.Start(b)
	return func() error {
		err := wait()
		c.mu.Lock()
		c.pending--
		c.mu.Unlock()
		return err
	}
}

// TestPipelinedBatchesCommitInOrder: many concurrent commands on a
// JetStream stream, with batches published while others are in flight,
// all commit, and the projections rebuilt from the stream are the live
// ones.
func TestPipelinedBatchesCommitInOrder(t *testing.T) {
	s := jstest.Server(t, false)
	l, err := jetstream.Open(jetstream.Config{URL: s.ClientURL(), Name: "PIPEORDER"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.Close() })
	c := &startCounter{Log: l}
	e := jetstreamEngine(t, c, l)
	var wg sync.WaitGroup
	errs := make(chan error, 400)
	for g := 0; g < 16; g++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; i < 25; i++ {
				if _, err := e.Do(context.Background(), createTaskCmd()); err != nil {
					errs <- err
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	cfg := DefaultConfig()
	rebuilt, err := projections.Rebuild(l, projections.Config{IdempotencyRetentionMs: cfg.IdempotencyRetention.Milliseconds()})
	if err != nil {
		t.Fatal(err)
	}
	var live []byte
	e.Read(func(s *projections.State) { live, _ = s.Canonical() })
	if b, _ := rebuilt.Canonical(); !bytes.Equal(b, live) || len(rebuilt.Tasks) != 400 {
		t.Fatalf("rebuilt from the stream: %d tasks, equal to the live projections: %v", len(rebuilt.Tasks), bytes.Equal(b, live))
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	t.Logf("%d batches started while another was in flight", c.overlaps)
}
