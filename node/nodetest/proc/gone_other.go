//go:build !unix

package proc

// processGone is false where it cannot be asked cheaply: a stale binary
// directory stays.
func processGone(int) bool { return false }
