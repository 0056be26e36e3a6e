//go:build windows

package agent

import (
	"os/exec"
	"syscall"
)

// setProcessGroup starts the command in a new process group
// (CREATE_NEW_PROCESS_GROUP), so a Ctrl+C to the agent's console, which
// only stops the next claim, is not delivered to the work command.
func setProcessGroup(cmd *exec.Cmd) {
	cmd.SysProcAttr = &syscall.SysProcAttr{CreationFlags: syscall.CREATE_NEW_PROCESS_GROUP}
}

// terminateProcess has no gentle form here: the process is killed.
func terminateProcess(cmd *exec.Cmd) { _ = cmd.Process.Kill() }

func killProcess(cmd *exec.Cmd) { _ = cmd.Process.Kill() }
