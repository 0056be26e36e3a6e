package commands

import (
	"time"

	"golang.org/x/sys/unix"
)

// elapsed reads CLOCK_BOOTTIME: monotonic, and counting the time a
// suspended machine slept (CLOCK_MONOTONIC does not), so a lease granted
// before a suspend is judged on the real time that passed.
func elapsed() time.Duration {
	var ts unix.Timespec
	if err := unix.ClockGettime(unix.CLOCK_BOOTTIME, &ts); err != nil {
		return time.Since(processStart)
	}
	return time.Duration(ts.Nano())
}

var processStart = time.Now() //tl:wallclock the monotonic origin of the fallback
