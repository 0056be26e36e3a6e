//go:build unix && !linux

package agent

import "syscall"

// workSysProcAttr: its own process group. These systems have no
// parent-death signal; the gate still keeps a command whose agent died
// before recording it from ever running.
func workSysProcAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Setpgid: true}
}

// processStartTime is not known here: the pid is recorded alone.
func processStartTime(int) (uint64, error) { return 0, errNoStartTime }

// killSurvivor never kills here: without a start time a reused pid cannot
// be told from the command.
func killSurvivor(int, uint64) (survivorFate, error) { return survivorUnknown, nil }
