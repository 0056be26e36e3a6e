package commands

import (
	"sync/atomic"
	"time"

	"golang.org/x/sys/unix"
)

// elapsed reads CLOCK_BOOTTIME: monotonic, and counting the time a
// suspended machine slept (CLOCK_MONOTONIC does not), so a lease granted
// before a suspend is judged on the real time that passed.
//
// Go reads that clock with a system call (its vDSO path serves only the
// monotonic and wall clocks), about half a microsecond on the sequencer
// for every command. So a reading is reused: within boottimeReuse of
// Go's monotonic clock after the last system call, and while the wall
// clock advanced as the monotonic one did, BOOTTIME advanced by exactly
// the monotonic time (the two differ only by time suspended, which moves
// the wall clock as much). A suspend, a wall-clock step or slew beyond
// boottimeSlack, or boottimeReuse passing, reads the clock again.
func elapsed() time.Duration {
	before := readClocks()
	if last := lastBoot.Load(); last != nil {
		if d, ok := boottimeSince(last, before); ok {
			return noEarlier(d)
		}
	}
	var ts unix.Timespec
	if err := unix.ClockGettime(unix.CLOCK_BOOTTIME, &ts); err != nil {
		return noEarlier(time.Since(processStart))
	}
	// The other clocks are read after BOOTTIME, so what is carried
	// forward from here is never ahead of BOOTTIME itself: elapsed never
	// goes back when the next system call reads it. A reading the thread
	// was held up around (it lags by as long) is not carried forward.
	r := readClocks()
	r.boot = time.Duration(ts.Nano())
	if r.mono-before.mono <= boottimeSlack {
		lastBoot.Store(&r)
	}
	return noEarlier(r.boot)
}

// elapsedHigh is the largest value elapsed returned. Readings stored by
// goroutines that raced may lag one another by up to boottimeSlack;
// noEarlier keeps what elapsed returns from ever going back across them.
var elapsedHigh atomic.Int64

func noEarlier(d time.Duration) time.Duration {
	for {
		h := elapsedHigh.Load()
		if int64(d) <= h {
			return time.Duration(h)
		}
		if elapsedHigh.CompareAndSwap(h, int64(d)) {
			return d
		}
	}
}

const (
	boottimeReuse = time.Millisecond      // the longest a BOOTTIME reading is carried forward
	boottimeSlack = 50 * time.Microsecond // how far the wall clock may drift from the monotonic one meanwhile
)

// clockReading is one moment on Go's monotonic and wall clocks, and
// BOOTTIME when it was read there.
type clockReading struct {
	mono time.Duration // since processStart
	wall int64         // Unix ns
	boot time.Duration
}

var lastBoot atomic.Pointer[clockReading]

func readClocks() clockReading {
	now := time.Now() //tl:wallclock the clocks themselves
	return clockReading{mono: now.Sub(processStart), wall: now.UnixNano()}
}

// boottimeSince carries last's BOOTTIME forward to now, if it can.
func boottimeSince(last *clockReading, now clockReading) (time.Duration, bool) {
	dm := now.mono - last.mono
	dw := time.Duration(now.wall - last.wall)
	if dm < 0 || dm >= boottimeReuse || dw-dm > boottimeSlack || dm-dw > boottimeSlack {
		return 0, false
	}
	return last.boot + dm, true
}

var processStart = time.Now() //tl:wallclock the monotonic origin of the fallback
