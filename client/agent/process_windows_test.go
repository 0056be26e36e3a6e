//go:build windows

package agent

import (
	"io"
	"os/exec"
	"syscall"
	"testing"
)

// The work command starts in its own process group, so a console Ctrl+C
// to the agent never reaches it.
func TestWorkCommandInOwnProcessGroup(t *testing.T) {
	cmd := exec.Command("cmd.exe", "/c", "exit 0")
	setProcessGroup(cmd)
	if cmd.SysProcAttr == nil || cmd.SysProcAttr.CreationFlags&syscall.CREATE_NEW_PROCESS_GROUP == 0 {
		t.Fatalf("creation flags %+v lack CREATE_NEW_PROCESS_GROUP", cmd.SysProcAttr)
	}
	p, err := startProcess([]string{"cmd.exe", "/c", "exit 0"}, nil, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	<-p.done
	if p.err != nil {
		t.Fatalf("the command in its own group failed: %v", p.err)
	}
	if p.cmd.SysProcAttr.CreationFlags&syscall.CREATE_NEW_PROCESS_GROUP == 0 {
		t.Fatal("startProcess did not set CREATE_NEW_PROCESS_GROUP")
	}
}
