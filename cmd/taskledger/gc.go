package main

import (
	"bufio"
	"fmt"
	"os"
	"runtime/debug"
	"strconv"
	"strings"
)

// Garbage-collector settings of the long-running commands (serve, bench).
//
// The sequencer allocates on every command and the idempotency records
// keep the live heap growing for the retention period, so with Go's
// default GOGC=100 the collector runs often and takes about a quarter of
// the CPU of a busy server. defaultGCPercent lets the heap grow to five
// times the live heap between collections (~25 % less CPU per command, see
// docs/performance.md); the soft memory limit (half of the machine's or
// the cgroup's memory) makes the collector run earlier instead when that
// would come close to the memory there is. The environment variables GOGC
// and GOMEMLIMIT, when set, are the runtime's and are left alone.
const (
	defaultGCPercent = 400
	// memoryLimitShare is the part of the available memory used as the
	// soft limit (1/memoryLimitShare).
	memoryLimitShare = 2
)

// gcSettings is what tuneGC set or found.
type gcSettings struct {
	Percent     int    // GOGC; < 0 is off
	Limit       int64  // soft memory limit in bytes (math.MaxInt64: none)
	PercentFrom string // "GOGC" or "default"
	LimitFrom   string // "GOMEMLIMIT", "default" or "none" (memory unknown)
}

func (g gcSettings) String() string {
	limit := "none"
	if g.Limit > 0 && g.Limit < 1<<62 {
		limit = fmt.Sprintf("%d MiB", g.Limit>>20)
	}
	return fmt.Sprintf("GOGC=%d (%s), memory limit %s (%s)", g.Percent, g.PercentFrom, limit, g.LimitFrom)
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
		g.Percent = defaultGCPercent
		debug.SetGCPercent(defaultGCPercent)
	}
	if v, ok := os.LookupEnv("GOMEMLIMIT"); ok && v != "" {
		g.LimitFrom = "GOMEMLIMIT"
		g.Limit = debug.SetMemoryLimit(-1)
	} else if mem := availableMemory(); mem > 0 {
		g.LimitFrom = "default"
		g.Limit = mem / memoryLimitShare
		debug.SetMemoryLimit(g.Limit)
	} else {
		g.LimitFrom = "none"
		g.Limit = debug.SetMemoryLimit(-1)
	}
	return g
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
