package main

import (
	"runtime/debug"
	"testing"
)

// restoreGC puts the process's collector settings back after a test.
func restoreGC(t *testing.T) {
	percent := debug.SetGCPercent(-1)
	debug.SetGCPercent(percent)
	limit := debug.SetMemoryLimit(-1)
	t.Cleanup(func() {
		debug.SetGCPercent(percent)
		debug.SetMemoryLimit(limit)
	})
}

func TestTuneGCDefaults(t *testing.T) {
	restoreGC(t)
	t.Setenv("GOGC", "")
	t.Setenv("GOMEMLIMIT", "")
	g := tuneGC()
	if g.Percent != defaultGCPercent || g.PercentFrom != "default" {
		t.Errorf("settings %+v, want GOGC=%d by default", g, defaultGCPercent)
	}
	if got := debug.SetGCPercent(-1); got != defaultGCPercent {
		t.Errorf("runtime GOGC %d, want %d", got, defaultGCPercent)
	}
	if mem := availableMemory(); mem > 0 {
		if g.LimitFrom != "default" || g.Limit != mem/memoryLimitShare || debug.SetMemoryLimit(-1) != g.Limit {
			t.Errorf("settings %+v, want a soft limit of %d bytes", g, mem/memoryLimitShare)
		}
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
	if g.Percent != 150 || g.PercentFrom != "GOGC" || g.Limit != 1<<30 || g.LimitFrom != "GOMEMLIMIT" {
		t.Errorf("settings %+v, want the environment's", g)
	}
	if debug.SetGCPercent(-1) != 150 || debug.SetMemoryLimit(-1) != 1<<30 {
		t.Error("tuneGC changed settings the environment chose")
	}
}
