package commands

import (
	"sync"
	"time"
)

// Clock is the one source of time. Only implementations of Clock read the
// machine's clocks.
type Clock interface {
	Now() time.Time
}

// WallClock reads the system clock as it is, steps included. A server
// uses SteadyClock; WallClock is for tools and tests that want the plain
// reading.
type WallClock struct{}

// Now returns the system time.
func (WallClock) Now() time.Time { return time.Now() }

// ManualClock is the test clock: it moves only when advanced.
type ManualClock struct {
	mu  sync.Mutex
	now time.Time
}

// NewManualClock returns a manual clock frozen at t.
func NewManualClock(t time.Time) *ManualClock { return &ManualClock{now: t} }

// Now returns the frozen time.
func (c *ManualClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

// Set moves the clock to t.
func (c *ManualClock) Set(t time.Time) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.now = t
}

// Advance moves the clock forward by d.
func (c *ManualClock) Advance(d time.Duration) { c.Set(c.Now().Add(d)) }

// TimeSource reads the machine's two clocks: the wall clock, which an
// operator, NTP or a virtual machine's host may step, and an elapsed-time
// clock that only moves forward at the rate of real time (on Linux
// CLOCK_BOOTTIME, which also counts a suspended machine's sleep).
type TimeSource interface {
	// Wall is the wall clock's reading (no monotonic part).
	Wall() time.Time
	// Elapsed is the time since some fixed point; it never steps.
	Elapsed() time.Duration
}

// SlewDivisor bounds how fast ledger time moves toward the wall clock: by
// at most 1/SlewDivisor of the real time elapsed (1%). A lease is thus
// stretched or cut by at most 1% however the wall clock steps, and a
// stepped wall clock is caught up in SlewDivisor times the step (100 h for
// a step of one hour).
const SlewDivisor = 100

// SteadyClock is a server's ledger time (decision D280): it starts at the
// wall clock (never below the floor it is given: the log's newest event)
// and then advances with the elapsed-time clock, moving toward the wall
// clock by at most 1% of the elapsed time. Lease deadlines and expiries
// are judged on it, so a step of the wall clock while the node runs
// neither stretches nor cuts a lease; event stamps come from it too, so
// they follow the wall clock without ever stepping (and never go back).
type SteadyClock struct {
	mu      sync.Mutex
	src     TimeSource
	elapsed time.Duration // the source's reading when now was last moved
	now     time.Time     // ledger time at that reading
}

// NewSteadyClock returns a clock reading src, starting at src's wall clock
// or at floor, whichever is later.
func NewSteadyClock(src TimeSource, floor time.Time) *SteadyClock {
	now := src.Wall()
	if now.Before(floor) {
		now = floor
	}
	return &SteadyClock{src: src, elapsed: src.Elapsed(), now: now.Round(0)}
}

// Now returns the ledger time: the last reading plus the real time elapsed
// since, moved toward the wall clock by at most elapsed/SlewDivisor.
func (c *SteadyClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	e := c.src.Elapsed()
	d := e - c.elapsed
	if d <= 0 {
		return c.now
	}
	c.elapsed = e
	next := c.now.Add(d)
	lim := d / SlewDivisor
	next = next.Add(min(max(c.src.Wall().Sub(next), -lim), lim))
	c.now = next
	return next
}

// Floor raises the ledger time to t if it is behind: a newer event was
// decided elsewhere (a cluster's previous sequencer, whose clock ran
// ahead), and time goes on from there instead of standing still until
// this clock catches up.
func (c *SteadyClock) Floor(t time.Time) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.now.Before(t) {
		c.now = t.Round(0)
	}
}

// Skew is how far the wall clock is from ledger time (positive: the wall
// clock is ahead), as of the last reading.
func (c *SteadyClock) Skew() time.Duration {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.src.Wall().Sub(c.now)
}
