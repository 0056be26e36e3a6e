//go:build !linux

package commands

import "time"

// elapsed is Go's monotonic reading since the process started.
func elapsed() time.Duration { return time.Since(processStart) }

var processStart = time.Now() //tl:wallclock the monotonic origin
