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

// held is a started work command that does not run yet: it waits at its
// gate until open; close gives up what the gate holds (the process must be
// killed first when it was never opened).
type held interface {
	open() error
	close()
}

// recordFunc commits the pid and start time of a held work command; the
// command runs only after it returned nil.
type recordFunc func(pid int, startTime uint64) error

// startProcess runs argv without a shell, the payload on stdin, stdout
// captured (bounded), stderr passed through, in its own process group that
// dies with the agent (Linux: a parent-death signal; Windows: a job object
// that kills on close). The command is started held: record is called with
// its pid and start time, and only when it succeeded is the command let
// run. argv[0] is looked up first, so a missing command is an error here.
func startProcess(argv []string, payload []byte, stderr io.Writer, record recordFunc) (*process, error) {
	path, err := exec.LookPath(argv[0])
	if err != nil {
		return nil, err
	}
	p := &process{stdout: &capBuffer{max: maxResultLength * 4}, done: make(chan struct{})}
	h, err := startHeld(p, path, argv, bytes.NewReader(payload), stderr)
	if err != nil {
		return nil, err
	}
	start, err := processStartTime(p.pid())
	if errors.Is(err, errNoStartTime) {
		start, err = 0, nil
	}
	if err == nil {
		err = record(p.pid(), start)
	}
	if err == nil {
		err = h.open()
	}
	if err != nil {
		p.kill()
		<-p.done
		h.close()
		return nil, err
	}
	go func() {
		<-p.done
		h.close()
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
