//go:build !unix && !windows

package agent

import (
	"io"
	"os/exec"
)

func setProcessGroup(*exec.Cmd) {}

type noGate struct{}

func (noGate) open() error { return nil }
func (noGate) close()      {}

// startHeld cannot hold the command here: it runs at once.
func startHeld(p *process, path string, argv []string, stdin io.Reader, stderr io.Writer) (held, error) {
	cmd := exec.Command(path, argv[1:]...)
	cmd.Stdin, cmd.Stdout, cmd.Stderr = stdin, p.stdout, stderr
	p.cmd = cmd
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	go func() {
		p.err = cmd.Wait()
		close(p.done)
	}()
	return noGate{}, nil
}

func processStartTime(int) (uint64, error) { return 0, errNoStartTime }

func killSurvivor(int, uint64) (survivorFate, error) { return survivorUnknown, nil }

// terminateProcess has no gentle form here: the process is killed.
func terminateProcess(cmd *exec.Cmd) { _ = cmd.Process.Kill() }

func killProcess(cmd *exec.Cmd) { _ = cmd.Process.Kill() }
