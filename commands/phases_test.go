package commands

import (
	"bytes"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"taskledger/ledger"
	"taskledger/projections"
)

// phaseLog collects the Phases the engine reports.
type phaseLog struct {
	mu  sync.Mutex
	got []Phases
}

func (p *phaseLog) add(ph Phases) {
	p.mu.Lock()
	p.got = append(p.got, ph)
	p.mu.Unlock()
}

func (p *phaseLog) all() []Phases {
	p.mu.Lock()
	defer p.mu.Unlock()
	return append([]Phases(nil), p.got...)
}

// newPhasedEngine is newTestEngine with Metrics.Phases set.
func newPhasedEngine(t *testing.T) (*Engine, *gatedLog, *phaseLog) {
	t.Helper()
	store, err := ledger.Open(t.TempDir(), ledger.Options{})
	if err != nil {
		t.Fatal(err)
	}
	cfg := DefaultConfig()
	pcfg := projections.Config{IdempotencyRetentionMs: cfg.IdempotencyRetention.Milliseconds()}
	g := &gatedLog{store: store}
	pl := &phaseLog{}
	e := NewEngine(Options{Log: g, State: projections.New(pcfg), Clock: NewManualClock(time.UnixMilli(1_800_000_000_000)),
		Config: cfg, Logger: zerolog.Nop(), Metrics: Metrics{Phases: pl.add},
		Load: func() (*projections.State, error) { return projections.Rebuild(store, pcfg) }})
	t.Cleanup(func() {
		e.Close()
		var live []byte
		e.Read(func(s *projections.State) { live, _ = s.Canonical() })
		if rebuilt, err := projections.Rebuild(store, pcfg); err != nil {
			t.Errorf("rebuild: %v", err)
		} else if b, _ := rebuilt.Canonical(); !bytes.Equal(b, live) {
			t.Errorf("projections rebuilt from the log differ from the live ones")
		}
		store.Close()
	})
	return e, g, pl
}

// TestPhasesTellWhereACommandWaited: with Metrics.Phases set, every
// command answered after a commit reports its phases once, on its
// caller's goroutine, before Do returns; the command whose commit was held
// reports that hold in its commit phase, and the command decided meanwhile
// reports it as its wait for the batch in flight. Commands of a failed
// batch report nothing (they never had a commit).
func TestPhasesTellWhereACommandWaited(t *testing.T) {
	e, g, pl := newPhasedEngine(t)
	release, held := holdNext(g)
	first := goDo(e, newCreate())
	<-held
	heldAt := time.Now()
	second := goDo(e, newCreate())
	waitSequenced(t, e, 2)
	decidedBy := time.Now() // the second command was decided before this
	releasedAt := time.Now()
	close(release)
	if err := <-first; err != nil {
		t.Fatal(err)
	}
	if err := <-second; err != nil {
		t.Fatal(err)
	}
	got := pl.all()
	if len(got) != 2 {
		t.Fatalf("%d phase reports for 2 commands answered after their commits, want 2: %+v", len(got), got)
	}
	for _, ph := range got {
		for _, d := range []time.Duration{ph.Queued, ph.Decide, ph.Wait, ph.Commit, ph.Publish, ph.Answer, ph.Wake} {
			if d < 0 {
				t.Fatalf("a negative phase: %+v", ph)
			}
		}
	}
	// Reports arrive in the order the callers ran again: tell them apart
	// by the phase each must hold.
	holdLen, waitLen := releasedAt.Sub(heldAt), releasedAt.Sub(decidedBy)
	var sawCommit, sawWait bool
	for _, ph := range got {
		sawCommit = sawCommit || ph.Commit >= holdLen
		sawWait = sawWait || ph.Wait >= waitLen
	}
	if !sawCommit || !sawWait {
		t.Fatalf("phases %+v: want one commit phase ≥ the hold (%s) and one wait ≥ the time between the second's decision and the release (%s)",
			got, holdLen, waitLen)
	}

	release, held = holdNext(g)
	g.failNext.Store(true)
	failed := goDo(e, newCreate())
	<-held
	close(release)
	if err := <-failed; !errors.Is(err, ErrUnavailable) {
		t.Fatalf("the failed batch: %v, want ErrUnavailable", err)
	}
	if n := len(pl.all()); n != 2 {
		t.Fatalf("%d phase reports after a failed batch, want still 2", n)
	}
}
