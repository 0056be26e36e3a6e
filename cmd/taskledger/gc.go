package main

import (
	"bufio"
	"fmt"
	"os"
	"runtime/debug"
	"strconv"
	"strings"

	"taskledger/internal/gcfloor"
)

// Garbage-collector settings of the long-running commands (serve, bench).
//
// The sequencer allocates on every command and the idempotency records
// keep the live heap growing for the retention period, so with Go's
// default GOGC=100 the collector runs often and takes about a quarter of
// the CPU of a busy server. gcfloor.DefaultPercent lets the heap grow to five
// times the live heap between collections (~25 % less CPU per command, see
// docs/performance.md); the soft memory limit (half of the machine's or
// the cgroup's memory) makes the collector run earlier instead when that
// would come close to the memory there is. A heap floor (gcfloor) keeps
// the collector from running before the heap reaches 1 GiB (or a quarter
// of the limit, when that is less) while the live heap is small: a young
// ledger's live heap is tens of megabytes, GOGC=400 alone collects
// several times a second under load, and the commits that meet a mark
// phase are the slowest hundredth (D479). The environment variables GOGC
// and GOMEMLIMIT, when set, are the runtime's and are left alone; a GOGC
// from the environment also turns the floor off.
// memoryLimitShare is the part of the available memory used as the soft
// limit (1/memoryLimitShare).
const memoryLimitShare = 2

// gcSettings is what tuneGC set or found.
type gcSettings struct {
	Percent     int    // GOGC; < 0 is off
	Limit       int64  // soft memory limit in bytes (math.MaxInt64: none)
	Floor       int64  // heap floor in bytes (0: none)
	PercentFrom string // "GOGC" or "default"
	LimitFrom   string // "GOMEMLIMIT", "default" or "none" (memory unknown)
}

func (g gcSettings) String() string {
	limit := "none"
	if g.Limit > 0 && g.Limit < 1<<62 {
		limit = fmt.Sprintf("%d MiB", g.Limit>>20)
	}
	floor := "none"
	if g.Floor > 0 {
		floor = fmt.Sprintf("%d MiB", g.Floor>>20)
	}
	return fmt.Sprintf("GOGC=%d (%s), memory limit %s (%s), heap floor %s", g.Percent, g.PercentFrom, limit, g.LimitFrom, floor)
}

// tuneGC applies the defaults above unless GOGC / GOMEMLIMIT are set.
func tuneGC() gcSettings {
	var g gcSettings
	if v, ok := os.LookupEnv("GOGC"); ok && v != "" {
		g.PercentFrom = "GOGC"
		g.Percent = debug.SetGCPercent(-1) // read the runtime's value back
		debug.SetGCPercent(g.Percent)
	} else {
		g.PercentFrom = "default"
		g.Percent = gcfloor.DefaultPercent
	}
	g.Limit, g.LimitFrom = tuneMemoryLimit()
	if g.PercentFrom == "default" {
		g.Floor = int64(gcfloor.FloorFor(g.Limit))
		gcfloor.Set(g.Percent, uint64(g.Floor))
	}
	return g
}

// tuneMemoryLimit sets the default soft memory limit unless GOMEMLIMIT is
// set, and returns the limit in force and where it came from.
func tuneMemoryLimit() (limit int64, from string) {
	if v, ok := os.LookupEnv("GOMEMLIMIT"); ok && v != "" {
		return debug.SetMemoryLimit(-1), "GOMEMLIMIT"
	}
	if mem := availableMemory(); mem > 0 {
		debug.SetMemoryLimit(mem / memoryLimitShare)
		return mem / memoryLimitShare, "default"
	}
	return debug.SetMemoryLimit(-1), "none"
}

// availableMemory is the cgroup's memory limit or the machine's memory,
// whichever is smaller, in bytes (0 when neither can be read).
func availableMemory() int64 {
	var mem int64
	if f, err := os.Open("/proc/meminfo"); err == nil {
		sc := bufio.NewScanner(f)
		for sc.Scan() {
			fields := strings.Fields(sc.Text())
			if len(fields) >= 2 && fields[0] == "MemTotal:" {
				if kb, err := strconv.ParseInt(fields[1], 10, 64); err == nil {
					mem = kb << 10
				}
				break
			}
		}
		f.Close()
	}
	for _, p := range []string{"/sys/fs/cgroup/memory.max", "/sys/fs/cgroup/memory/memory.limit_in_bytes"} {
		b, err := os.ReadFile(p)
		if err != nil {
			continue
		}
		if lim, err := strconv.ParseInt(strings.TrimSpace(string(b)), 10, 64); err == nil && lim > 0 && (mem == 0 || lim < mem) {
			mem = lim
		}
	}
	return mem
}
