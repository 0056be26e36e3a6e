package proc

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"sync"
	"testing"
	"time"
)

// The server binary of Taskledger is built once per test process, lazily,
// into a directory named after this process's pid; directories of
// processes that are gone are removed at the next build, so at most the
// binaries of running test processes remain.
var (
	binOnce sync.Once
	binPath string
	binErr  error
)

const binRoot = "taskledger-e2e-bins"

// Taskledger returns the path of the real taskledger binary, building it
// on first use.
func Taskledger(t testing.TB) string {
	t.Helper()
	binOnce.Do(func() {
		root := filepath.Join(os.TempDir(), binRoot)
		if ents, err := os.ReadDir(root); err == nil {
			for _, e := range ents {
				if pid, err := strconv.Atoi(e.Name()); err == nil && pid != os.Getpid() && processGone(pid) {
					os.RemoveAll(filepath.Join(root, e.Name()))
				}
			}
		}
		dir := filepath.Join(root, strconv.Itoa(os.Getpid()))
		if binErr = os.MkdirAll(dir, 0o755); binErr != nil {
			return
		}
		binPath = filepath.Join(dir, "taskledger")
		binErr = goBuild("build", "-tags", "failpoints", "-o", binPath, "./cmd/taskledger")
	})
	if binErr != nil {
		t.Fatalf("build taskledger: %v", binErr)
	}
	return binPath
}

// goBuild runs the go command with args in the module root.
func goBuild(args ...string) error {
	root, err := moduleRoot()
	if err != nil {
		return err
	}
	cmd := exec.Command("go", args...)
	cmd.Dir = root
	if out, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("go %v: %v\n%s", args, err, out)
	}
	return nil
}

// Result is the outcome of one run of a command.
type Result struct {
	Stdout, Stderr string
	Code           int
}

// Exec runs bin with args to completion (bounded by WaitLimit) and returns
// its exit code and output.
func Exec(t testing.TB, bin string, args ...string) Result {
	t.Helper()
	cmd := exec.Command(bin, args...)
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	if err := cmd.Start(); err != nil {
		t.Fatalf("start %s %v: %v", filepath.Base(bin), args, err)
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	var err error
	select {
	case err = <-done:
	case <-time.After(WaitLimit):
		_ = cmd.Process.Kill()
		<-done
		t.Fatalf("%s %v did not finish within %v", filepath.Base(bin), args, WaitLimit)
	}
	code := 0
	var ee *exec.ExitError
	if errors.As(err, &ee) {
		code = ee.ExitCode()
	} else if err != nil {
		t.Fatalf("%s %v: %v", filepath.Base(bin), args, err)
	}
	return Result{Stdout: out.String(), Stderr: errb.String(), Code: code}
}

// CLI runs the taskledger binary with args (see Exec).
func CLI(t testing.TB, args ...string) Result {
	t.Helper()
	return Exec(t, Taskledger(t), args...)
}

// Run runs a short command to completion and returns exit code, stdout,
// stderr (see Exec).
func Run(t testing.TB, bin string, args ...string) (int, string, string) {
	t.Helper()
	r := Exec(t, bin, args...)
	return r.Code, r.Stdout, r.Stderr
}
