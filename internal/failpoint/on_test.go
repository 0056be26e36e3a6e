//go:build failpoints

package failpoint

import (
	"errors"
	"os"
	"os/exec"
	"syscall"
	"testing"
)

func TestEnableFailsThePointUntilDisabled(t *testing.T) {
	if err := Eval(BlobWrite); err != nil {
		t.Fatalf("off point: %v", err)
	}
	disable, err := Enable(BlobWrite, "enospc")
	if err != nil {
		t.Fatal(err)
	}
	if err := Eval(BlobWrite); !errors.Is(err, syscall.ENOSPC) {
		t.Fatalf("Eval = %v, want ENOSPC", err)
	}
	inner, err := Enable(BlobWrite, "eio")
	if err != nil {
		t.Fatal(err)
	}
	if err := Eval(BlobWrite); !errors.Is(err, syscall.EIO) {
		t.Fatalf("Eval = %v, want EIO", err)
	}
	inner() // back to the outer setting
	if err := Eval(BlobWrite); !errors.Is(err, syscall.ENOSPC) {
		t.Fatalf("after the inner disable: %v, want ENOSPC", err)
	}
	disable()
	if err := Eval(BlobWrite); err != nil {
		t.Fatalf("after disable: %v", err)
	}
}

func TestEnableRefusesBadInput(t *testing.T) {
	if _, err := Enable("nope", ActionKill); !errors.Is(err, ErrUnknownPoint) {
		t.Fatalf("unknown point: %v", err)
	}
	if _, err := Enable(ClaimCommitted, "enospc"); !errors.Is(err, ErrBadAction) {
		t.Fatalf("error action on a kill-only point: %v", err)
	}
	if err := Eval(ClaimCommitted); err != nil {
		t.Fatalf("a refused Enable changed the point: %v", err)
	}
}

// The environment variable is read in a child process: a kill point ends
// it with SIGKILL, an error point returns its error, a bad list exits 2.
func TestEnvKillsErrsOrRefuses(t *testing.T) {
	if os.Getenv("FAILPOINT_CHILD") == "1" {
		if err := Eval(BlobWrite); err != nil {
			os.Stdout.WriteString(err.Error())
		}
		_ = Eval(SnapshotMidWrite)
		os.Exit(0)
	}
	child := func(spec string) (*os.ProcessState, string) {
		cmd := exec.Command(os.Args[0], "-test.run=^TestEnvKillsErrsOrRefuses$")
		cmd.Env = append(os.Environ(), "FAILPOINT_CHILD=1", Env+"="+spec)
		out, _ := cmd.Output()
		return cmd.ProcessState, string(out)
	}
	ps, out := child(BlobWrite + "=eio")
	if ps.ExitCode() != 0 || out != syscall.EIO.Error() {
		t.Fatalf("error point: exit %d, out %q", ps.ExitCode(), out)
	}
	ps, _ = child(SnapshotMidWrite)
	if ws, ok := ps.Sys().(syscall.WaitStatus); !ok || !ws.Signaled() || ws.Signal() != syscall.SIGKILL {
		t.Fatalf("kill point: %v", ps)
	}
	if ps, _ = child("no-such-point"); ps.ExitCode() != 2 {
		t.Fatalf("bad list: exit %d, want 2", ps.ExitCode())
	}
}
