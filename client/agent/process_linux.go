//go:build linux

package agent

import (
	"bytes"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"strconv"
	"syscall"
)

// workSysProcAttr: its own process group (a Ctrl-C to the agent, which only
// stops the next claim, does not reach it) and SIGKILL when the agent dies.
func workSysProcAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
}

// procStat is what /proc/PID/stat tells about a process.
type procStat struct {
	state     byte
	startTime uint64
}

// readProcStat reads /proc/PID/stat: the state (field 3) and the start
// time in clock ticks after boot (field 22). The command name (field 2)
// may hold spaces and parentheses: fields are counted after its last ')'.
func readProcStat(pid int) (procStat, error) {
	data, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if errors.Is(err, fs.ErrNotExist) {
		return procStat{}, errProcessGone
	}
	if err != nil {
		return procStat{}, err
	}
	return parseProcStat(data)
}

func parseProcStat(data []byte) (procStat, error) {
	i := bytes.LastIndexByte(data, ')')
	if i < 0 {
		return procStat{}, fmt.Errorf("%w: no command name", errBadProcStat)
	}
	f := bytes.Fields(data[i+1:])
	// f[0] is field 3 (state), so field 22 is f[19].
	if len(f) < 20 || len(f[0]) != 1 {
		return procStat{}, fmt.Errorf("%w: %d fields", errBadProcStat, len(f))
	}
	st, err := strconv.ParseUint(string(f[19]), 10, 64)
	if err != nil {
		return procStat{}, fmt.Errorf("%w: start time %q", errBadProcStat, f[19])
	}
	return procStat{state: f[0][0], startTime: st}, nil
}

// processStartTime is the start time of pid (clock ticks after boot).
func processStartTime(pid int) (uint64, error) {
	s, err := readProcStat(pid)
	return s.startTime, err
}

// killSurvivor kills the process group of a work command left by a
// previous run, only when pid is alive and still has the recorded start
// time (a pid reused by another process is never touched).
func killSurvivor(pid int, startTime uint64) (survivorFate, error) {
	if pid <= 0 || startTime == 0 {
		return survivorUnknown, nil
	}
	s, err := readProcStat(pid)
	switch {
	case errors.Is(err, errProcessGone):
		return survivorGone, nil
	case err != nil:
		return survivorUnknown, err
	case s.startTime != startTime:
		return survivorReused, nil
	case s.state == 'Z' || s.state == 'X':
		return survivorGone, nil
	}
	// The command leads its own group (Setpgid): kill the group, and the
	// leader itself should it have left it.
	_ = syscall.Kill(-pid, syscall.SIGKILL)
	if err := syscall.Kill(pid, syscall.SIGKILL); err != nil && !errors.Is(err, syscall.ESRCH) {
		return survivorUnknown, err
	}
	return survivorKilled, nil
}
