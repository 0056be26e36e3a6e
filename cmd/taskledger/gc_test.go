package main

import (
	"runtime/debug"
	"testing"

	"taskledger/internal/gcfloor"
)

// restoreGC puts the process's collector settings back after a test (and
// takes the heap floor away).
func restoreGC(t *testing.T) {
	percent := debug.SetGCPercent(-1)
	debug.SetGCPercent(percent)
	limit := debug.SetMemoryLimit(-1)
	t.Cleanup(func() {
		gcfloor.Set(percent, 0)
		debug.SetMemoryLimit(limit)
	})
}

func TestTuneGCDefaults(t *testing.T) {
	restoreGC(t)
	t.Setenv("GOGC", "")
	t.Setenv("GOMEMLIMIT", "")
	g := tuneGC()
	if g.Percent != gcfloor.DefaultPercent || g.PercentFrom != "default" {
		t.Errorf("settings %+v, want GOGC=%d by default", g, gcfloor.DefaultPercent)
	}
	if mem := availableMemory(); mem > 0 {
		if g.LimitFrom != "default" || g.Limit != mem/memoryLimitShare || debug.SetMemoryLimit(-1) != g.Limit {
			t.Errorf("settings %+v, want a soft limit of %d bytes", g, mem/memoryLimitShare)
		}
	}
	if g.Floor != int64(gcfloor.FloorFor(g.Limit)) || g.Floor <= 0 {
		t.Errorf("settings %+v, want a heap floor of %d bytes", g, gcfloor.FloorFor(g.Limit))
	}
	// The floor only ever raises the default (gcfloor's tests cover how).
	if got := gcfloor.Current(); got < gcfloor.DefaultPercent {
		t.Errorf("runtime GOGC %d, want at least %d", got, gcfloor.DefaultPercent)
	}
}

// GOGC and GOMEMLIMIT are the runtime's: when set, tuneGC changes nothing.
func TestTuneGCLeavesEnvironmentSettings(t *testing.T) {
	restoreGC(t)
	debug.SetGCPercent(150)
	debug.SetMemoryLimit(1 << 30)
	t.Setenv("GOGC", "150")
	t.Setenv("GOMEMLIMIT", "1GiB")
	g := tuneGC()
	if g.Percent != 150 || g.PercentFrom != "GOGC" || g.Limit != 1<<30 || g.LimitFrom != "GOMEMLIMIT" || g.Floor != 0 {
		t.Errorf("settings %+v, want the environment's", g)
	}
	if debug.SetGCPercent(-1) != 150 || debug.SetMemoryLimit(-1) != 1<<30 {
		t.Error("tuneGC changed settings the environment chose")
	}
}
