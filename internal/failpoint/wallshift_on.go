//go:build failpoints

package failpoint

import (
	"os"
	"strings"
	"sync"
	"time"
)

var wallShiftPath = sync.OnceValue(func() string { return os.Getenv(WallShiftEnv) })

// WallShift returns the shift the file named by WallShiftEnv holds now.
func WallShift() time.Duration {
	p := wallShiftPath()
	if p == "" {
		return 0
	}
	b, err := os.ReadFile(p)
	if err != nil {
		return 0
	}
	d, err := time.ParseDuration(strings.TrimSpace(string(b)))
	if err != nil {
		return 0
	}
	return d
}
