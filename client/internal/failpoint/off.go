//go:build !(taskledger_failpoints && unix)

package failpoint

// Hit does nothing in normal builds.
func Hit(string) {}
