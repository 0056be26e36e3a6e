package agent

import "errors"

var (
	// ErrUsage is a command-line mistake.
	ErrUsage = errors.New("agent: usage")
	// ErrBadExec means --exec cannot be split into a program and arguments.
	ErrBadExec = errors.New("agent: bad --exec command")
	// ErrBadOutput means the command's stdout is not a JSON object of at
	// most 2 KiB.
	ErrBadOutput = errors.New("agent: command output is not a JSON object of at most 2 KiB")

	// errProcessGone: no process has the pid.
	errProcessGone = errors.New("agent: process gone")
	// errBadProcStat: /proc/PID/stat could not be parsed.
	errBadProcStat = errors.New("agent: unreadable /proc stat")
	// errNoStartTime: this system does not tell a process's start time.
	errNoStartTime = errors.New("agent: process start time unknown on this system")
)

// Exit codes of the agent subcommands.
const (
	// ExitOK: success (run: stopped by a signal after finishing its work).
	ExitOK = 0
	// ExitError: a local error (state, decryption, server refusal).
	ExitError = 1
	// ExitUsage: bad command line.
	ExitUsage = 2
	// ExitNeedsPerson: a task needs an operator; see `agent status`.
	ExitNeedsPerson = 3
	// ExitUnauthorized: the server refused the device token (401).
	ExitUnauthorized = 4
)
