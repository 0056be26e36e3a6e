//go:build !unix && !windows

package agent

import "os/exec"

func setProcessGroup(*exec.Cmd) {}

// terminateProcess has no gentle form here: the process is killed.
func terminateProcess(cmd *exec.Cmd) { _ = cmd.Process.Kill() }

func killProcess(cmd *exec.Cmd) { _ = cmd.Process.Kill() }
