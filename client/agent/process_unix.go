//go:build unix

package agent

import (
	"io"
	"os"
	"os/exec"
	"runtime"
	"syscall"
)

// gateScript holds the work command until the agent has recorded it: the
// shell reads one line from fd 3 (EOF — the agent died or gave up — exits
// 125 without running anything), closes fd 3 and execs the command in
// place, so the pid and start time the agent recorded are the command's.
// The shell only gates: the command's words are passed as "$@", never
// parsed by it.
const gateScript = `read -r go <&3 || exit 125; exec 3<&-; exec "$@"`

type gate struct{ w *os.File }

func (g *gate) open() error {
	_, err := g.w.Write([]byte("go\n"))
	if cerr := g.w.Close(); err == nil {
		err = cerr
	}
	return err
}

func (g *gate) close() { _ = g.w.Close() }

// startHeld starts the gate shell in its own process group with a
// parent-death signal where the system has one. The parent-death signal
// belongs to the thread that forks, not to the process: the goroutine that
// starts the command stays locked to its thread until the command was
// waited for, so the signal fires only when the agent itself dies.
func startHeld(p *process, path string, argv []string, stdin io.Reader, stderr io.Writer) (held, error) {
	r, w, err := os.Pipe()
	if err != nil {
		return nil, err
	}
	args := append([]string{"-c", gateScript, "taskledger-work-gate", path}, argv[1:]...)
	cmd := exec.Command("/bin/sh", args...)
	cmd.Stdin, cmd.Stdout, cmd.Stderr = stdin, p.stdout, stderr
	cmd.ExtraFiles = []*os.File{r}
	cmd.SysProcAttr = workSysProcAttr()
	p.cmd = cmd
	started := make(chan error, 1)
	go func() {
		runtime.LockOSThread()
		defer runtime.UnlockOSThread()
		if err := cmd.Start(); err != nil {
			started <- err
			return
		}
		started <- nil
		p.err = cmd.Wait()
		close(p.done)
	}()
	err = <-started
	r.Close()
	if err != nil {
		w.Close()
		return nil, err
	}
	return &gate{w: w}, nil
}

func terminateProcess(cmd *exec.Cmd) {
	_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGTERM)
}

func killProcess(cmd *exec.Cmd) {
	_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
}

// setProcessGroup puts a helper command (--start-when) in its own process
// group, so a Ctrl-C to the agent does not reach it.
func setProcessGroup(cmd *exec.Cmd) {
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
}
