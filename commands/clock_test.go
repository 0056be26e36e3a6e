package commands_test

import (
	"sync"
	"testing"
	"time"

	"taskledger/commands"
)

// stepTime is a TimeSource a test steps: pass moves both clocks as real
// time does, step moves only the wall clock (an operator, NTP, a VM host).
type stepTime struct {
	mu   sync.Mutex
	wall time.Time
	el   time.Duration
}

func (s *stepTime) Wall() time.Time        { s.mu.Lock(); defer s.mu.Unlock(); return s.wall }
func (s *stepTime) Elapsed() time.Duration { s.mu.Lock(); defer s.mu.Unlock(); return s.el }
func (s *stepTime) pass(d time.Duration) {
	s.mu.Lock()
	s.wall = s.wall.Add(d)
	s.el += d
	s.mu.Unlock()
}
func (s *stepTime) step(d time.Duration) { s.mu.Lock(); s.wall = s.wall.Add(d); s.mu.Unlock() }

var t0 = time.Date(2026, 12, 4, 12, 0, 0, 0, time.UTC)

func TestSteadyClockFollowsAWallClockThatDoesNotStep(t *testing.T) {
	src := &stepTime{wall: t0}
	c := commands.NewSteadyClock(src, time.Time{})
	for i := 0; i < 5; i++ {
		src.pass(7 * time.Second)
		if got, want := c.Now(), src.Wall(); !got.Equal(want) {
			t.Fatalf("after %d passes: %s, want the wall clock %s", i+1, got, want)
		}
	}
}

func TestSteadyClockIgnoresAStepBack(t *testing.T) {
	src := &stepTime{wall: t0}
	c := commands.NewSteadyClock(src, time.Time{})
	before := c.Now()
	src.step(-time.Hour)
	src.pass(60 * time.Second)
	got := c.Now().Sub(before)
	// 60 s passed; ledger time moved 60 s less at most 1% toward the wall.
	if got != 60*time.Second-600*time.Millisecond {
		t.Fatalf("60 s after a step back of one hour, ledger time moved %s, want 59.4s", got)
	}
	if c.Skew() >= 0 {
		t.Fatalf("skew %s: the wall clock is behind ledger time", c.Skew())
	}
}

func TestSteadyClockIgnoresAStepForward(t *testing.T) {
	src := &stepTime{wall: t0}
	c := commands.NewSteadyClock(src, time.Time{})
	before := c.Now()
	src.step(2 * time.Hour)
	src.pass(8 * time.Second)
	if got := c.Now().Sub(before); got != 8*time.Second+80*time.Millisecond {
		t.Fatalf("8 s after a step forward of two hours, ledger time moved %s, want 8.08s", got)
	}
}

func TestSteadyClockCatchesUpWithASteppedWallClock(t *testing.T) {
	src := &stepTime{wall: t0}
	c := commands.NewSteadyClock(src, time.Time{})
	src.step(10 * time.Second)
	// At 1% it takes 1000 s of real time to absorb a 10 s step, then it
	// follows the wall clock again, without ever overshooting it.
	for i := 0; i < 120; i++ {
		src.pass(10 * time.Second)
		if now := c.Now(); now.After(src.Wall()) {
			t.Fatalf("ledger time %s passed the wall clock %s", now, src.Wall())
		}
	}
	if got := c.Now(); !got.Equal(src.Wall()) {
		t.Fatalf("after 1200 s: %s, want the wall clock %s", got, src.Wall())
	}
}

func TestSteadyClockStartsAtItsFloorAndNeverGoesBack(t *testing.T) {
	src := &stepTime{wall: t0}
	floor := t0.Add(time.Hour) // the log's newest event: a clock stepped back while the node was down
	c := commands.NewSteadyClock(src, floor)
	if got := c.Now(); !got.Equal(floor) {
		t.Fatalf("start: %s, want the floor %s", got, floor)
	}
	src.pass(30 * time.Second)
	if got := c.Now().Sub(floor); got != 30*time.Second-300*time.Millisecond {
		t.Fatalf("30 s after start below the floor: moved %s, want 29.7s (time goes on from the floor)", got)
	}
	last := c.Now()
	src.step(-24 * time.Hour)
	for i := 0; i < 10; i++ {
		src.pass(time.Second)
		now := c.Now()
		if !now.After(last) {
			t.Fatalf("ledger time went from %s to %s", last, now)
		}
		last = now
	}
	c.Floor(last.Add(time.Minute))
	if got := c.Now(); !got.Equal(last.Add(time.Minute)) {
		t.Fatalf("after Floor: %s, want %s", got, last.Add(time.Minute))
	}
	c.Floor(last) // a floor behind ledger time changes nothing
	if got := c.Now(); !got.Equal(last.Add(time.Minute)) {
		t.Fatalf("a lower floor moved the clock to %s", got)
	}
}
