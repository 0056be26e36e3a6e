//go:build windows

package agent

import (
	"io"
	"os/exec"
	"syscall"
	"testing"

	"golang.org/x/sys/windows"
)

// The work command starts in its own process group, so a console Ctrl+C
// to the agent never reaches it; it is recorded before it runs, and runs
// (resumed from its suspended start) inside a kill-on-close job.
func TestWorkCommandInOwnProcessGroup(t *testing.T) {
	cmd := exec.Command("cmd.exe", "/c", "exit 0")
	setProcessGroup(cmd)
	if cmd.SysProcAttr == nil || cmd.SysProcAttr.CreationFlags&syscall.CREATE_NEW_PROCESS_GROUP == 0 {
		t.Fatalf("creation flags %+v lack CREATE_NEW_PROCESS_GROUP", cmd.SysProcAttr)
	}
	recorded := 0
	p, err := startProcess([]string{"cmd.exe", "/c", "exit 0"}, nil, io.Discard, func(pid int, _ uint64) error {
		recorded = pid
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	<-p.done
	if p.err != nil {
		t.Fatalf("the command in its own group failed: %v", p.err)
	}
	if recorded != p.pid() {
		t.Fatalf("recorded pid %d, ran %d", recorded, p.pid())
	}
	if f := p.cmd.SysProcAttr.CreationFlags; f&syscall.CREATE_NEW_PROCESS_GROUP == 0 || f&windows.CREATE_SUSPENDED == 0 {
		t.Fatalf("creation flags %#x lack CREATE_NEW_PROCESS_GROUP or CREATE_SUSPENDED", f)
	}
}
