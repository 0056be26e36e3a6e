//go:build windows

package agent

import (
	"fmt"
	"io"
	"os/exec"
	"syscall"
	"unsafe"

	"golang.org/x/sys/windows"
)

// setProcessGroup starts the command in a new process group
// (CREATE_NEW_PROCESS_GROUP), so a Ctrl+C to the agent's console, which
// only stops the next claim, is not delivered to the work command.
func setProcessGroup(cmd *exec.Cmd) {
	cmd.SysProcAttr = &syscall.SysProcAttr{CreationFlags: syscall.CREATE_NEW_PROCESS_GROUP}
}

var ntResumeProcess = windows.NewLazySystemDLL("ntdll.dll").NewProc("NtResumeProcess")

// jobGate is a suspended work command inside a job object that kills
// every process in it when its last handle closes — when the agent exits,
// however it exits.
type jobGate struct {
	job  windows.Handle
	proc windows.Handle
}

func (g *jobGate) open() error {
	if r, _, _ := ntResumeProcess.Call(uintptr(g.proc)); r != 0 {
		return fmt.Errorf("agent: resume the work command: NTSTATUS %#x", r)
	}
	return nil
}

func (g *jobGate) close() {
	_ = windows.CloseHandle(g.proc)
	_ = windows.CloseHandle(g.job)
}

// newKillOnCloseJob creates a job object whose processes die when its
// last handle closes.
func newKillOnCloseJob() (windows.Handle, error) {
	job, err := windows.CreateJobObject(nil, nil)
	if err != nil {
		return 0, err
	}
	info := windows.JOBOBJECT_EXTENDED_LIMIT_INFORMATION{
		BasicLimitInformation: windows.JOBOBJECT_BASIC_LIMIT_INFORMATION{LimitFlags: windows.JOB_OBJECT_LIMIT_KILL_ON_JOB_CLOSE},
	}
	if _, err := windows.SetInformationJobObject(job, windows.JobObjectExtendedLimitInformation,
		uintptr(unsafe.Pointer(&info)), uint32(unsafe.Sizeof(info))); err != nil {
		_ = windows.CloseHandle(job)
		return 0, err
	}
	return job, nil
}

// startHeld starts the command suspended (CREATE_SUSPENDED) in its own
// process group, puts it in a kill-on-close job object, and resumes it
// only at open.
func startHeld(p *process, path string, argv []string, stdin io.Reader, stderr io.Writer) (held, error) {
	job, err := newKillOnCloseJob()
	if err != nil {
		return nil, err
	}
	cmd := exec.Command(path, argv[1:]...)
	cmd.Stdin, cmd.Stdout, cmd.Stderr = stdin, p.stdout, stderr
	cmd.SysProcAttr = &syscall.SysProcAttr{CreationFlags: syscall.CREATE_NEW_PROCESS_GROUP | windows.CREATE_SUSPENDED}
	p.cmd = cmd
	if err := cmd.Start(); err != nil {
		_ = windows.CloseHandle(job)
		return nil, err
	}
	go func() {
		p.err = cmd.Wait()
		close(p.done)
	}()
	g := &jobGate{job: job}
	g.proc, err = windows.OpenProcess(windows.PROCESS_SET_QUOTA|windows.PROCESS_TERMINATE|windows.PROCESS_SUSPEND_RESUME,
		false, uint32(cmd.Process.Pid))
	if err == nil {
		err = windows.AssignProcessToJobObject(job, g.proc)
	}
	if err != nil {
		_ = cmd.Process.Kill()
		<-p.done
		g.close()
		return nil, err
	}
	return g, nil
}

// processStartTime is not recorded here: the job object ends the command
// with the agent, so no survivor is ever left to find.
func processStartTime(int) (uint64, error) { return 0, errNoStartTime }

func killSurvivor(int, uint64) (survivorFate, error) { return survivorUnknown, nil }

// terminateProcess has no gentle form here: the process is killed.
func terminateProcess(cmd *exec.Cmd) { _ = cmd.Process.Kill() }

func killProcess(cmd *exec.Cmd) { _ = cmd.Process.Kill() }
