package commands

import (
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// TestBoottimeIsCarriedForwardOnlyWhileNothingSlept: a BOOTTIME reading
// is carried forward by the monotonic time since it, and read again when
// the wall clock moved more or less than the monotonic one (a suspend, or
// a step), or once boottimeReuse passed.
func TestBoottimeIsCarriedForwardOnlyWhileNothingSlept(t *testing.T) {
	last := &clockReading{mono: time.Second, wall: 1_000_000_000_000, boot: 5 * time.Second}
	at := func(dm, dw time.Duration) clockReading {
		return clockReading{mono: last.mono + dm, wall: last.wall + int64(dw)}
	}
	for _, c := range []struct {
		name   string
		now    clockReading
		want   time.Duration
		reused bool
	}{
		{"both clocks advanced alike", at(300*time.Microsecond, 300*time.Microsecond), 5*time.Second + 300*time.Microsecond, true},
		{"within the slack", at(300*time.Microsecond, 340*time.Microsecond), 5*time.Second + 300*time.Microsecond, true},
		{"a suspend: the wall clock ran on", at(300*time.Microsecond, 2*time.Second), 0, false},
		{"the wall clock stepped back", at(300*time.Microsecond, -time.Second), 0, false},
		{"the wall clock stepped forward a little", at(300*time.Microsecond, 400*time.Microsecond), 0, false},
		{"the reading is too old", at(boottimeReuse, boottimeReuse), 0, false},
		{"the monotonic clock went back (another reading raced)", at(-time.Microsecond, -time.Microsecond), 0, false},
	} {
		got, ok := boottimeSince(last, c.now)
		if ok != c.reused || got != c.want {
			t.Errorf("%s: %v, %v; want %v, %v", c.name, got, ok, c.want, c.reused)
		}
	}
}

// TestElapsedFollowsBoottime: elapsed never goes back and stays within
// the reuse window of the kernel's own CLOCK_BOOTTIME.
func TestElapsedFollowsBoottime(t *testing.T) {
	var prev time.Duration
	for i := range 20000 {
		var ts unix.Timespec
		if err := unix.ClockGettime(unix.CLOCK_BOOTTIME, &ts); err != nil {
			t.Fatal(err)
		}
		before := time.Duration(ts.Nano())
		got := elapsed()
		if err := unix.ClockGettime(unix.CLOCK_BOOTTIME, &ts); err != nil {
			t.Fatal(err)
		}
		after := time.Duration(ts.Nano())
		if got < prev {
			t.Fatalf("call %d: elapsed went back from %v to %v", i, prev, got)
		}
		if got < before-boottimeSlack || got > after+boottimeSlack {
			t.Fatalf("call %d: elapsed %v outside BOOTTIME's %v…%v", i, got, before, after)
		}
		prev = got
	}
}

// TestElapsedNeverGoesBackAcrossRacingReadings: a reading stored by a
// goroutine that was held up lags the kernel's clock; a value returned
// from it after a fresher one was returned elsewhere is not earlier.
func TestElapsedNeverGoesBackAcrossRacingReadings(t *testing.T) {
	prev := elapsed()
	lagging := readClocks()
	lagging.boot = prev - time.Millisecond // stored by a goroutine held up a millisecond
	lastBoot.Store(&lagging)
	if got := elapsed(); got < prev {
		t.Fatalf("elapsed went back by %v after an earlier call returned %v", prev-got, prev)
	}
}
