package agent

import (
	"bytes"
	"errors"
	"io"
	"os/exec"
	"time"

	"taskledger/client"
)

// process is one run of the command.
type process struct {
	cmd    *exec.Cmd
	stdout *capBuffer
	done   chan struct{}
	err    error
}

// startProcess runs argv without a shell, the payload on stdin, stdout
// captured (bounded), stderr passed through, in its own process group.
func startProcess(argv []string, payload []byte, stderr io.Writer) (*process, error) {
	cmd := exec.Command(argv[0], argv[1:]...)
	cmd.Stdin = bytes.NewReader(payload)
	out := &capBuffer{max: maxResultLength * 4}
	cmd.Stdout = out
	cmd.Stderr = stderr
	setProcessGroup(cmd)
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	p := &process{cmd: cmd, stdout: out, done: make(chan struct{})}
	go func() {
		p.err = cmd.Wait()
		close(p.done)
	}()
	return p, nil
}

func (p *process) pid() int { return p.cmd.Process.Pid }

// exitCode is the exit status (after done), -1 for a signal.
func (p *process) exitCode() int {
	if p.err == nil {
		return 0
	}
	var ee *exec.ExitError
	if errors.As(p.err, &ee) {
		return ee.ExitCode()
	}
	return -1
}

// terminate asks the process to stop, waits up to grace, then kills it.
func (p *process) terminate(clock client.Clock, grace time.Duration) {
	terminateProcess(p.cmd)
	t := clock.NewTimer(grace)
	defer t.Stop()
	select {
	case <-p.done:
	case <-t.C():
		p.kill()
		<-p.done
	}
}

func (p *process) kill() { killProcess(p.cmd) }

// capBuffer keeps at most max bytes and notes an overflow.
type capBuffer struct {
	bytes.Buffer
	max      int
	overflow bool
}

func (c *capBuffer) Write(p []byte) (int, error) {
	if c.Len()+len(p) > c.max {
		c.overflow = true
		return len(p), nil
	}
	return c.Buffer.Write(p)
}
