//go:build !linux

package node

// diskSpace is unknown on this platform: the disk gauges read 0.
func diskSpace(string) (free, size uint64, ok bool) { return 0, 0, false }
