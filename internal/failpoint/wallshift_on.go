//go:build failpoints

package failpoint

import (
	"os"
	"strings"
	"sync"
	"time"
)

// WallShiftEnv names a file holding a duration (Go syntax, e.g. "-1h")
// that a failpoints build adds to every wall-clock reading of the server's
// clock: a test steps a real server's wall clock by rewriting the file. An
// unreadable or malformed file shifts nothing.
const WallShiftEnv = "TASKLEDGER_TEST_WALL_SHIFT_FILE"

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
