//go:build unix

package agent

import (
	"errors"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"testing"
)

// The work command is held until its pid is recorded: a record that fails
// means the command never runs; one that succeeds lets it run with the
// recorded pid (the gate execs the command in place).
func TestWorkCommandRunsOnlyAfterRecord(t *testing.T) {
	dir := t.TempDir()
	mark := filepath.Join(dir, "ran")
	argv := []string{"sh", "-c", `echo $$ > "$0"`, mark}
	boom := errors.New("state write failed")
	_, err := startProcess(argv, nil, io.Discard, func(pid int, _ uint64) error {
		if _, err := os.Stat(mark); err == nil {
			t.Error("the command ran before it was recorded")
		}
		return boom
	})
	if !errors.Is(err, boom) {
		t.Fatalf("startProcess: %v, want the record's error", err)
	}
	if _, err := os.Stat(mark); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("the command ran although its record failed (%v)", err)
	}

	var recorded int
	p, err := startProcess(argv, nil, io.Discard, func(pid int, _ uint64) error {
		if _, err := os.Stat(mark); err == nil {
			t.Error("the command ran before it was recorded")
		}
		recorded = pid
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	<-p.done
	if p.exitCode() != 0 {
		t.Fatalf("exit %d", p.exitCode())
	}
	data, err := os.ReadFile(mark)
	if err != nil {
		t.Fatal(err)
	}
	if got := string(data); got != strconv.Itoa(recorded)+"\n" || recorded != p.pid() {
		t.Fatalf("the command ran as pid %q, recorded %d, started %d", got, recorded, p.pid())
	}
}

// A command that is not found is an error before anything starts.
func TestWorkCommandNotFound(t *testing.T) {
	called := false
	_, err := startProcess([]string{"/nonexistent/taskledger-work"}, nil, io.Discard, func(int, uint64) error {
		called = true
		return nil
	})
	if err == nil || called {
		t.Fatalf("err %v, record called %v", err, called)
	}
}
