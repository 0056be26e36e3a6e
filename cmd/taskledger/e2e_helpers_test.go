package main_test

// Helpers of the end-to-end tests of this binary; the process harness
// itself (building the binary, server processes, CLI runs, a goroutine-safe
// HTTP client) is node/nodetest/proc, shared with the client's tests.

import (
	"testing"

	"taskledger/node/nodetest/proc"
)

// startServer starts the real binary on dir (see proc.Serve). The load
// tests drive devices far past the default per-device rate; a test of the
// limit passes its own --device-rate in extra, after this one.
func startServer(t testing.TB, dir string, extra ...string) *proc.Server {
	t.Helper()
	return proc.Serve(t, proc.Taskledger(t), dir, append([]string{"--device-rate", "0"}, extra...)...)
}

// presenceBody is a presence heartbeat reporting every default check true.
func presenceBody(deviceID string) map[string]any {
	return map[string]any{"device_id": deviceID, "app_version": "1.0.0", "os_version": "Android 14",
		"target_app_version": "7.1.0",
		"checks":             map[string]bool{"accessibility_connected": true, "target_app_installed": true}}
}
