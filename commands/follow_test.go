package commands

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"taskledger/ledger"
	"taskledger/projections"
)

// newFollower is an engine over its own empty state that is given no
// commands: it follows the log another engine writes.
func newFollower(t *testing.T, src *ledger.Store) (*Engine, *[]ledger.Head) {
	t.Helper()
	cfg := DefaultConfig()
	pcfg := projections.Config{IdempotencyRetentionMs: cfg.IdempotencyRetention.Milliseconds()}
	var seen []ledger.Head
	f := NewEngine(Options{Log: refuseLog{}, State: projections.New(pcfg), Clock: WallClock{}, Config: cfg,
		Logger: zerolog.Nop(), Load: func() (*projections.State, error) { return projections.Rebuild(src, pcfg) },
		Committed: func(h ledger.Head, _ []*ledger.Event, _ []any) { seen = append(seen, h) }})
	t.Cleanup(f.Close)
	return f, &seen
}

type refuseLog struct{}

func (refuseLog) Append(*ledger.Batch) error { return errors.New("a follower does not append") }

func rangeAfter(t *testing.T, s *ledger.Store, after uint64) []*ledger.Event {
	t.Helper()
	var evs []*ledger.Event
	if err := s.Range(after, func(e *ledger.Event) error { evs = append(evs, e); return nil }); err != nil {
		t.Fatal(err)
	}
	return evs
}

// TestFollowAppliesAnotherSequencersEvents: a follower fed the events a
// sequencer committed has the same projections (canonical bytes), the
// same head, authenticates the device the sequencer registered, and ran
// its committed hook with the new head.
func TestFollowAppliesAnotherSequencersEvents(t *testing.T) {
	seq, g, _ := newTestEngine(t)
	f, seen := newFollower(t, g.store)
	createTask(t, seq)
	if _, err := seq.Do(context.Background(), &RegisterDevice{AdminReq: AdminReq{Operator: "op", Key: NewID(), Fingerprint: []byte{2}},
		OwnerID: "o", Name: "d", TokenHash: HashToken("device-token")}); err != nil {
		t.Fatal(err)
	}
	evs := rangeAfter(t, g.store, 0)
	if err := f.Follow(evs[:1]); err != nil {
		t.Fatal(err)
	}
	if err := f.Follow(evs[1:]); err != nil {
		t.Fatal(err)
	}
	var want, got []byte
	seq.Read(func(s *projections.State) { want, _ = s.Canonical() })
	f.Read(func(s *projections.State) { got, _ = s.Canonical() })
	if string(want) != string(got) {
		t.Fatal("the follower's projections differ from the sequencer's")
	}
	if h := f.Head(); h.Seq != seq.Head().Seq || h.Seq != uint64(len(evs)) {
		t.Fatalf("follower head %d, sequencer head %d, events %d", h.Seq, seq.Head().Seq, len(evs))
	}
	if _, ok := f.Authenticate(HashToken("device-token")); !ok {
		t.Fatal("the follower does not authenticate the device the sequencer registered")
	}
	if len(*seen) != 2 || (*seen)[1].Seq != uint64(len(evs)) {
		t.Fatalf("committed hook saw %v", *seen)
	}
}

// TestFollowRefusesAGap: events that skip a seq, or do not chain, are
// refused and change nothing.
func TestFollowRefusesAGap(t *testing.T) {
	seq, g, _ := newTestEngine(t)
	f, _ := newFollower(t, g.store)
	createTask(t, seq)
	createTask(t, seq)
	evs := rangeAfter(t, g.store, 0)
	if err := f.Follow(evs[1:]); !errors.Is(err, ErrNotContinuing) {
		t.Fatalf("a gap: %v, want ErrNotContinuing", err)
	}
	bad := *evs[0]
	bad.PrevHash = []byte("not the genesis")
	if err := f.Follow([]*ledger.Event{&bad}); !errors.Is(err, ErrNotContinuing) {
		t.Fatalf("a broken chain: %v, want ErrNotContinuing", err)
	}
	if h := f.Head(); h.Seq != 0 {
		t.Fatalf("head moved to %d", h.Seq)
	}
}

// TestExclusiveWaitsForTheBatchInFlight: a function given to Exclusive
// runs only after the batch in flight committed, and sees it.
func TestExclusiveWaitsForTheBatchInFlight(t *testing.T) {
	e, g, _ := newTestEngine(t)
	release, held := holdNext(g)
	go func() {
		_, _ = e.Do(context.Background(), &CreateTask{AdminReq: AdminReq{Operator: "op", Key: NewID(), Fingerprint: []byte{1}},
			Payload: `{"a":1}`, PayloadSHA256: HashToken(`{"a":1}`), AuthorizeTTL: time.Hour})
	}()
	<-held
	ran := make(chan uint64, 1)
	go func() {
		_ = e.Exclusive(func(s *projections.State) error { ran <- s.Head.Seq; return nil })
	}()
	select {
	case seq := <-ran:
		t.Fatalf("Exclusive ran at head %d while a batch was in flight", seq)
	case <-time.After(50 * time.Millisecond):
	}
	close(release)
	if seq := <-ran; seq != 1 {
		t.Fatalf("Exclusive saw head %d, want 1", seq)
	}
}

// TestExclusiveAfterCloseIsRefused.
func TestExclusiveAfterCloseIsRefused(t *testing.T) {
	e, _, _ := newTestEngine(t)
	e.Close()
	if err := e.Exclusive(func(*projections.State) error { return nil }); !errors.Is(err, ErrShuttingDown) {
		t.Fatalf("got %v, want ErrShuttingDown", err)
	}
}
