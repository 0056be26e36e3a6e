package proc

import (
	"fmt"
	"os"
	"testing"

	"go.uber.org/goleak"
)

// RunTests is the body of a test package's TestMain: it builds the
// binaries into a temporary folder named after prefix, runs the tests,
// removes the folder and, when the tests passed, fails on leaked
// goroutines. It returns the exit code.
func RunTests(m *testing.M, prefix string, bins *Binaries) int {
	dir, err := os.MkdirTemp("", prefix)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer os.RemoveAll(dir)
	if *bins, err = Build(dir); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	code := m.Run()
	if code == 0 {
		if err := goleak.Find(); err != nil {
			fmt.Fprintln(os.Stderr, "goleak:", err)
			code = 1
		}
	}
	return code
}
