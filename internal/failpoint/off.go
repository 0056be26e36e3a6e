//go:build !failpoints

package failpoint

import "time"

// Enabled is false: this build has no failpoints.
const Enabled = false

// Eval returns nil: this build has no failpoints.
func Eval(string) error { return nil }

// Enable fails with ErrNotBuilt: this build has no failpoints.
func Enable(string, string) (disable func(), err error) {
	return func() {}, ErrNotBuilt
}

// WallShift returns 0: this build has no failpoints.
func WallShift() time.Duration { return 0 }
