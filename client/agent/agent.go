// Package agent implements `taskledger agent …`: enroll, run, status and
// resolve, on top of client/device.
package agent

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"strings"
	"sync"
	"time"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"taskledger/wire"

	"taskledger/client"
	"taskledger/client/device"
	"taskledger/client/localstate"
	"taskledger/internal/cli"
)

const usage = `usage: taskledger agent <command> [flags]

commands:
  enroll --server URL --device-id ID --token-file F [--key-file PATH]
  run --exec CMD [--poll 2s] [--check NAME=true|false]... [--heartbeat D]
      [--start-delay D] [--start-when CMD] [--renew-every R]
      [--evidence-file PATH] [--ca-file FILE]
  status [--json]
  resolve TASK_ID
every command takes --state DIR (default: the user's state directory)
`

// env carries what tests replace: the clock and the signal source.
type env struct {
	clock   client.Clock
	signals <-chan os.Signal
	// device options for tests (timeouts, CAs, send hook).
	devOpts device.Options
}

// Main runs `taskledger agent` with args (the words after "agent") and
// returns the process exit code: the agent's command tree on its own.
func Main(args []string, stdout, stderr io.Writer) int {
	if len(args) == 0 {
		fmt.Fprint(stderr, usage)
		return ExitUsage
	}
	root := NewCommand(stdout, stderr)
	cli.Prepare(root)
	return cli.Execute(root, args, stderr, "taskledger agent")
}

// NewCommand is `taskledger agent` and its subcommands (enroll, run,
// status, resolve), for the binary's command tree.
func NewCommand(stdout, stderr io.Writer) *cobra.Command {
	return newCommand(stdout, stderr, env{clock: client.SystemClock{}})
}

func newCommand(stdout, stderr io.Writer, e env) *cobra.Command {
	stderr = &syncWriter{w: stderr}
	c := &cobra.Command{Use: "agent", Short: "the device agent (enroll, run, status, resolve)",
		Long: "The device agent: enroll a device, run it against a server, show its status, resolve a stuck task.\n\n" + usage +
			"\nExit codes: 0 ok, 1 error (state, decryption, a refusal), 2 usage, 3 a task needs a person, 4 the server refused the device token (401)."}
	c.AddCommand(newEnrollCmd(stdout, stderr, e), newRunCmd(stdout, stderr, e), newStatusCmd(stdout, stderr), newResolveCmd(stdout, stderr))
	return c
}

// stateFlag defines --state, which every agent command takes.
func stateFlag(fs *pflag.FlagSet) *string {
	return fs.String("state", "", "state directory (default: the user's state directory)")
}

func stateDir(flagVal string) (string, error) {
	if flagVal != "" {
		return flagVal, nil
	}
	return localstate.DefaultDir()
}

// fail prints err and maps it to an exit code.
func fail(stderr io.Writer, err error) int {
	fmt.Fprintf(stderr, "taskledger agent: %v\n", err)
	switch {
	case errors.Is(err, device.ErrNeedsPerson):
		fmt.Fprintln(stderr, "taskledger agent: see `taskledger agent status`; after an operator dealt with the task on the server, run `taskledger agent resolve ID`")
		return ExitNeedsPerson
	case errors.Is(err, client.ErrUnauthorized):
		return ExitUnauthorized
	case errors.Is(err, ErrUsage):
		return ExitUsage
	}
	return ExitError
}

func newEnrollCmd(stdout, stderr io.Writer, e env) *cobra.Command {
	c := &cobra.Command{Use: "enroll --server URL --device-id ID --token-file F [--key-file PATH]",
		Short: "store a device's identity and sealed token in the state",
		Long:  "Validate the server URL (same rules as the transport) and the device id, read the token file (the token alone, trailing newline allowed; the file may be deleted afterwards), seal the token and store the identity. It contacts nothing. Without --key-file the key is kept in the OS keychain (Linux, macOS) or DPAPI (Windows)."}
	fs := c.Flags()
	state := stateFlag(fs)
	server := fs.String("server", "", "server URL (https, or http to loopback)")
	devID := fs.String("device-id", "", "device id (UUID)")
	tokenFile := fs.String("token-file", "", "file holding the device token alone")
	keyFile := fs.String("key-file", "", "encryption key file (created 0600 when missing)")
	c.RunE = cli.Code(func(pos []string) int {
		if len(pos) != 0 || *server == "" || *devID == "" || *tokenFile == "" {
			return fail(stderr, fmt.Errorf("%w: enroll --server URL --device-id ID --token-file F [--key-file PATH]", ErrUsage))
		}
		dir, err := stateDir(*state)
		if err != nil {
			return fail(stderr, err)
		}
		err = device.Enroll(device.EnrollOptions{StateDir: dir, ServerURL: *server, DeviceID: *devID,
			TokenFile: *tokenFile, KeyFile: *keyFile, Clock: e.clock})
		if err != nil {
			return fail(stderr, err)
		}
		fmt.Fprintf(stdout, "enrolled device %s with %s (state %s); the token file may now be deleted\n", *devID, *server, dir)
		return ExitOK
	})
	return c
}

func newResolveCmd(stdout, stderr io.Writer) *cobra.Command {
	c := &cobra.Command{Use: "resolve TASK_ID", Short: "forget a task (or refused claim) that needed a person, sending nothing",
		Long: "Remove the entry ID (a task id, or the claim key of a refused claim) and any local claim or pending call for it, sending nothing. Use it after the operator dealt with the task on the server (task recover); the agent then claims again. It runs while `agent run` is stopped (the state lock)."}
	state := stateFlag(c.Flags())
	c.RunE = cli.Code(func(pos []string) int {
		if len(pos) != 1 {
			return fail(stderr, fmt.Errorf("%w: resolve TASK_ID", ErrUsage))
		}
		dir, err := stateDir(*state)
		if err != nil {
			return fail(stderr, err)
		}
		if err := device.Resolve(dir, pos[0]); err != nil {
			return fail(stderr, err)
		}
		fmt.Fprintf(stdout, "resolved %s; the agent may claim again\n", pos[0])
		return ExitOK
	})
	return c
}

// statusView is what `agent status --json` prints: no secrets.
type statusView struct {
	State       string              `json:"state_dir"`
	Enrolled    bool                `json:"enrolled"`
	Server      string              `json:"server,omitempty"`
	DeviceID    string              `json:"device_id,omitempty"`
	KeySource   string              `json:"key_source,omitempty"`
	KeyFile     string              `json:"key_file,omitempty"`
	KeyID       string              `json:"key_id,omitempty"`
	SessionID   string              `json:"session_id,omitempty"`
	Pending     *pendingView        `json:"pending"`
	Active      *activeView         `json:"active"`
	NeedsPerson []localstate.Manual `json:"needs_person"`
}

type pendingView struct {
	Kind   string `json:"kind"`
	Op     string `json:"op,omitempty"`
	Key    string `json:"key"`
	TaskID string `json:"task_id,omitempty"`
}

type activeView struct {
	TaskID         string     `json:"task_id"`
	Generation     int64      `json:"generation"`
	State          wire.State `json:"state"`
	Version        int64      `json:"version"`
	ExecutionID    string     `json:"execution_id,omitempty"`
	LeaseExpiresAt time.Time  `json:"lease_expires_at"`
	Launched       bool       `json:"launched"`
}

func newStatusCmd(stdout, stderr io.Writer) *cobra.Command {
	c := &cobra.Command{Use: "status [--json]", Short: "the agent's identity, session, pending request, active claim and tasks needing a person",
		Long: "Print the identity, session, pending request, active claim and the tasks needing a person — no secret (--json for machines). A launched-but-unreported claim is listed as needing a person. It runs while `agent run` is stopped (the state lock)."}
	fs := c.Flags()
	state := stateFlag(fs)
	asJSON := fs.Bool("json", false, "print JSON")
	c.RunE = cli.Code(func(pos []string) int {
		if len(pos) != 0 {
			return fail(stderr, fmt.Errorf("%w: status takes no arguments", ErrUsage))
		}
		dir, err := stateDir(*state)
		if err != nil {
			return fail(stderr, err)
		}
		store, st, err := device.OpenStore(dir)
		if err != nil {
			return fail(stderr, err)
		}
		defer store.Close()
		v := statusView{State: dir, SessionID: st.SessionID, NeedsPerson: st.Manual}
		if v.NeedsPerson == nil {
			v.NeedsPerson = []localstate.Manual{}
		}
		if id := st.Identity; id != nil {
			v.Enrolled, v.Server, v.DeviceID, v.KeySource, v.KeyFile, v.KeyID = true, id.ServerURL, id.DeviceID, id.KeySource, id.KeyFile, id.KeyID
		}
		if p := st.Pending; p != nil {
			v.Pending = &pendingView{Kind: p.Kind, Op: p.Op, Key: p.Key, TaskID: p.TaskID}
		}
		if a := st.Active; a != nil {
			v.Active = &activeView{TaskID: a.TaskID, Generation: a.Generation, State: a.State, Version: a.Version,
				ExecutionID: a.ExecutionID, LeaseExpiresAt: a.LeaseExpiresAt, Launched: a.Launched}
			if a.Launched && a.State != client.StateClaimed {
				v.NeedsPerson = append(v.NeedsPerson, localstate.Manual{ID: a.TaskID, TaskID: a.TaskID, Generation: a.Generation,
					ExecutionID: a.ExecutionID, Reason: "the task was running when the agent stopped; it is not run again"})
			}
		}
		if *asJSON {
			enc := json.NewEncoder(stdout)
			enc.SetIndent("", "  ")
			_ = enc.Encode(v)
			return ExitOK
		}
		printStatus(stdout, v)
		return ExitOK
	})
	return c
}

func printStatus(w io.Writer, v statusView) {
	fmt.Fprintf(w, "state:      %s\n", v.State)
	if !v.Enrolled {
		fmt.Fprintln(w, "enrolled:   no")
		return
	}
	fmt.Fprintf(w, "server:     %s\ndevice:     %s\nkey source: %s %s\nsession:    %s\n",
		v.Server, v.DeviceID, v.KeySource, v.KeyFile+v.KeyID, v.SessionID)
	if p := v.Pending; p != nil {
		fmt.Fprintf(w, "pending:    %s %s key=%s task=%s (outcome unknown, will be replayed)\n", p.Kind, p.Op, p.Key, p.TaskID)
	} else {
		fmt.Fprintln(w, "pending:    none")
	}
	if a := v.Active; a != nil {
		fmt.Fprintf(w, "active:     task %s generation %d state %s version %d execution %s lease until %s launched %v\n",
			a.TaskID, a.Generation, a.State, a.Version, a.ExecutionID, client.FormatTime(a.LeaseExpiresAt), a.Launched)
	} else {
		fmt.Fprintln(w, "active:     none")
	}
	if len(v.NeedsPerson) == 0 {
		fmt.Fprintln(w, "needs a person: none")
	}
	for _, m := range v.NeedsPerson {
		fmt.Fprintf(w, "NEEDS A PERSON: %s (task %s, generation %d): %s\n", m.ID, m.TaskID, m.Generation, m.Reason)
	}
}

// syncWriter serializes writes (logger and child stderr share it).
type syncWriter struct {
	mu sync.Mutex
	w  io.Writer
}

func (s *syncWriter) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.w.Write(p)
}

func newLogger(w io.Writer, clock client.Clock) *slog.Logger {
	return slog.New(slog.NewTextHandler(w, &slog.HandlerOptions{
		ReplaceAttr: func(groups []string, a slog.Attr) slog.Attr {
			if a.Key == slog.TimeKey && len(groups) == 0 {
				return slog.String(slog.TimeKey, client.FormatTime(clock.Now()))
			}
			return a
		},
	}))
}

// splitChecks parses the --check values. With none, the checks start as
// agent_running=true and learn is set: the agent then adds the checks the
// server names as missing (see runner.presence).
func splitChecks(vals []string) (m map[string]bool, learn bool, err error) {
	m = map[string]bool{}
	for _, v := range vals {
		name, val, ok := strings.Cut(v, "=")
		if !ok || (val != "true" && val != "false") {
			return nil, false, fmt.Errorf("%w: --check NAME=true|false, got %q", ErrUsage, v)
		}
		m[name] = val == "true"
	}
	if len(m) == 0 {
		m["agent_running"] = true
		learn = true
	}
	return m, learn, nil
}

type listFlag []string

func (l *listFlag) String() string     { return strings.Join(*l, ",") }
func (l *listFlag) Set(v string) error { *l = append(*l, v); return nil }

func (l *listFlag) Type() string { return "NAME=true|false" }
