//go:build unix

package agent

import (
	"os/exec"
	"syscall"
)

// setProcessGroup puts the command in its own process group, so a Ctrl-C
// to the agent (which only stops the next claim) does not reach it.
func setProcessGroup(cmd *exec.Cmd) {
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
}

func terminateProcess(cmd *exec.Cmd) {
	_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGTERM)
}

func killProcess(cmd *exec.Cmd) {
	_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
}
