package commands

import (
	"time"

	"taskledger/internal/failpoint"
)

// SystemTime is the machine's TimeSource: the wall clock, and an elapsed
// clock that steps never move (elapsed_linux.go: CLOCK_BOOTTIME; elsewhere
// Go's monotonic reading). In a build with failpoints the wall clock can
// be shifted from outside the process (failpoint.WallShift), which is how
// the tests step a real server's wall clock.
type SystemTime struct{}

// Wall returns the wall clock's reading.
func (SystemTime) Wall() time.Time {
	return time.Now().Round(0).Add(failpoint.WallShift()) //tl:wallclock the clock itself
}

// Elapsed returns the time since a fixed point, never stepped.
func (SystemTime) Elapsed() time.Duration { return elapsed() }
