package main

// The command line through the real binary: the spellings the standard
// flag package accepted (-name, -name=value, flags after the arguments)
// still work on the cobra tree, and a mistake in the command line exits 2
// with one stable line naming it and the command's help, changing nothing.

import (
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/spf13/cobra"

	"taskledger/node/nodetest/proc"
)

func TestSingleDashAndInterspersedFlagsThroughTheBinary(t *testing.T) {
	dir, id := reviewLedger(t)
	var outs []string
	for _, args := range [][]string{
		{"history", "--data", dir, id},
		{"history", "-data", dir, id},
		{"history", id, "-data=" + dir},
		{"history", id, "-data", dir},
	} {
		r := proc.CLI(t, args...)
		if r.Code != 0 || !strings.Contains(r.Stdout, "task.claimed") {
			t.Fatalf("%v: exit %d\n%s%s", args, r.Code, r.Stdout, r.Stderr)
		}
		outs = append(outs, r.Stdout)
	}
	for i := range outs {
		if outs[i] != outs[0] {
			t.Fatalf("the spellings print different histories:\n%s\n---\n%s", outs[0], outs[i])
		}
	}
	// Booleans: -json, -json=true; a flag of the parent before a subcommand.
	for _, args := range [][]string{{"history", id, "-data", dir, "-json"}, {"history", "-json=true", id, "--data=" + dir}} {
		r := proc.CLI(t, args...)
		if r.Code != 0 || !strings.HasPrefix(r.Stdout, "{") {
			t.Fatalf("%v: exit %d\n%s%s", args, r.Code, r.Stdout, r.Stderr)
		}
	}
	if r := proc.CLI(t, "snapshot", "-data", dir, "list"); r.Code != 0 {
		t.Fatalf("snapshot -data DIR list: exit %d %s", r.Code, r.Stderr)
	}
	state := filepath.Join(t.TempDir(), "state")
	if r := proc.CLI(t, "agent", "status", "-state", state, "-json"); r.Code != 0 || !strings.Contains(r.Stdout, `"enrolled": false`) {
		t.Fatalf("agent status -state DIR -json: exit %d\n%s%s", r.Code, r.Stdout, r.Stderr)
	}
}

func TestCommandLineMistakesExitTwoAndChangeNothing(t *testing.T) {
	dir, id := reviewLedger(t)
	state := filepath.Join(t.TempDir(), "state")
	for _, tc := range []struct {
		args []string
		want string // the whole of stderr
	}{
		{[]string{"verify", "--bogus"}, "taskledger: unknown flag: --bogus (see `taskledger verify --help`)\n"},
		{[]string{"verify", "-bogus"}, "taskledger: unknown flag: --bogus (see `taskledger verify --help`)\n"},
		{[]string{"history", id, "--data"}, "taskledger: flag needs an argument: --data (see `taskledger history --help`)\n"},
		{[]string{"export", "--data", dir, "--after", "x"},
			"taskledger: invalid argument \"x\" for \"--after\" flag: strconv.ParseUint: parsing \"x\": invalid syntax (see `taskledger export --help`)\n"},
		{[]string{"agent", "run", "--state", state, "--exec", "true", "--poll", "soon"},
			"taskledger: invalid argument \"soon\" for \"--poll\" flag: time: invalid duration \"soon\" (see `taskledger agent run --help`)\n"},
		{[]string{"agent", "run", "-state", state, "--exec", "true", "-check"},
			"taskledger: flag needs an argument: --check (see `taskledger agent run --help`)\n"},
		{[]string{"bogus"}, "taskledger: unknown command \"bogus\" for \"taskledger\"\n"},
		{[]string{"snapshot", "bogus", "--data", dir},
			"taskledger: unknown command \"bogus\" for \"taskledger snapshot\": use one of create, list (see `taskledger snapshot --help`)\n"},
		{[]string{"task", "show"}, "taskledger: accepts 1 arg(s), received 0\n"},
		{[]string{"verify", "--data", dir, "--key", "x"}, "taskledger: --key, --token-file and --ca-file go with --server\n"},
		{[]string{"verify", "--ledger", "nats://127.0.0.1:1", "--server", "http://127.0.0.1:1"}, "taskledger: --ledger and --server exclude each other\n"},
		{[]string{"verify", "--data", dir, "--nats-name", "X"}, "taskledger: --nats-name, --nats-creds and --nats-replicas go with --ledger\n"},
		{[]string{"history", id, "--ledger", "nats://127.0.0.1:1", "--server", "http://127.0.0.1:1"}, "taskledger: --ledger and --server exclude each other\n"},
		{[]string{"export", "--data", dir, "--ca-file", "ca.pem"}, "taskledger: --token-file and --ca-file go with --server\n"},
		{[]string{"agent", "help", "nope"}, "taskledger: unknown command \"nope\" for \"taskledger agent\" (see `taskledger agent --help`)\n"},
	} {
		r := proc.CLI(t, tc.args...)
		if r.Code != 2 || r.Stderr != tc.want || r.Stdout != "" {
			t.Errorf("%v: exit %d, stdout %q, stderr %q; want exit 2 and %q", tc.args, r.Code, r.Stdout, r.Stderr, tc.want)
		}
	}
	if _, err := os.Stat(state); !os.IsNotExist(err) {
		t.Fatalf("a refused agent command line created its state directory: %v", err)
	}
	if r := proc.CLI(t, "verify", "-data", dir); r.Code != 0 {
		t.Fatalf("the ledger after the refused command lines: exit %d %s", r.Code, r.Stderr)
	}
}

// A command group given without its command exits 2 with one line that
// names the program once (Execute's prefix), then the group and its
// commands. Every group of the tree is in the table, so a new group comes
// with its line.
func TestGroupWithoutACommandNamesTheProgramOnce(t *testing.T) {
	want := map[string]string{
		"admin-token":    "taskledger: admin-token needs a command: create, list, revoke (see `taskledger admin-token --help`)\n",
		"agent":          "taskledger: agent needs a command: enroll, resolve, run, status (see `taskledger agent --help`)\n",
		"checkpoint-key": "taskledger: checkpoint-key needs a command: create, export (see `taskledger checkpoint-key --help`)\n",
		"device":         "taskledger: device needs a command: list, register, revoke, show (see `taskledger device --help`)\n",
		"projections":    "taskledger: projections needs a command: rebuild (see `taskledger projections --help`)\n",
		"snapshot":       "taskledger: snapshot needs a command: create, list (see `taskledger snapshot --help`)\n",
		"task": "taskledger: task needs a command: amend, authorize, cancel, create, history, list, recover, " +
			"revoke-authorization, show (see `taskledger task --help`)\n",
	}
	groups := map[string]bool{} // the path below taskledger
	var walk func(c *cobra.Command)
	walk = func(c *cobra.Command) {
		if c.HasSubCommands() && c.HasParent() {
			groups[strings.TrimPrefix(c.CommandPath(), "taskledger ")] = true
		}
		for _, s := range c.Commands() {
			walk(s)
		}
	}
	walk(newRoot(io.Discard, io.Discard))
	for g := range groups {
		if _, ok := want[g]; !ok {
			t.Errorf("group %s has no line in the table", g)
		}
	}
	for g, line := range want {
		if !groups[g] {
			t.Errorf("%s is not a command group", g)
		}
		r := proc.CLI(t, strings.Fields(g)...)
		if r.Code != 2 || r.Stdout != "" || r.Stderr != line {
			t.Errorf("%s: exit %d, stdout %q, stderr %q; want exit 2 and %q", g, r.Code, r.Stdout, r.Stderr, line)
		}
	}
}

// `taskledger help PATH…` and `GROUP help COMMAND` show the agent's flags
// (they printed a generic sentence before).
func TestAgentHelpThroughTheBinary(t *testing.T) {
	for _, args := range [][]string{{"agent", "run", "--help"}, {"help", "agent", "run"}, {"agent", "help", "run"}, {"agent", "run", "-help"}} {
		r := proc.CLI(t, args...)
		if r.Code != 0 {
			t.Fatalf("%v: exit %d %s", args, r.Code, r.Stderr)
		}
		for _, f := range []string{"--exec", "--ca-file", "--start-delay", "--start-when", "--renew-every", "--evidence-file", "--state", "--check", "--poll", "--heartbeat"} {
			if !strings.Contains(r.Stdout, f+" ") {
				t.Errorf("%v does not list %s:\n%s", args, f, r.Stdout)
			}
		}
	}
}

// A variable that gives a flag its default is not the flag given: an
// operator's environment (set for serve or the remote commands) does not
// make verify or history refuse their own mode.
func TestEnvironmentDefaultsAreNotGivenFlags(t *testing.T) {
	o := newOpCLI(t)
	o.ok("task", "create", "--payload", `{"a":1}`)
	t.Setenv("TASKLEDGER_TOKEN_FILE", o.tokenFile)
	t.Setenv("TASKLEDGER_CA_FILE", filepath.Join(t.TempDir(), "absent.pem"))
	t.Setenv("TASKLEDGER_CLAIM_TOKEN_SECRET", strings.Repeat("ab", 32))
	// Through the server: the secret of the environment is serve's, not a
	// --claim-token-secret given to verify.
	t.Setenv("TASKLEDGER_CA_FILE", "")
	if r := reviewCLI("verify", "--server", o.n.URL); r.code != 0 {
		t.Fatalf("verify --server with TASKLEDGER_CLAIM_TOKEN_SECRET set: exit %d %s", r.code, r.stderr)
	}
	if r := reviewCLI("verify", "--server", o.n.URL, "--claim-token-secret", strings.Repeat("ab", 32)); r.code != 2 ||
		!strings.Contains(r.stderr, "--claim-token-secret goes with the stopped ledger") {
		t.Fatalf("verify --server --claim-token-secret: exit %d %s", r.code, r.stderr)
	}
	// Offline: the token and CA files of the environment are the remote
	// commands', not flags given to history.
	dir, id := reviewLedger(t)
	t.Setenv("TASKLEDGER_CA_FILE", filepath.Join(t.TempDir(), "absent.pem"))
	if r := reviewCLI("history", id, "--data", dir); r.code != 0 {
		t.Fatalf("history --data with TASKLEDGER_TOKEN_FILE and TASKLEDGER_CA_FILE set: exit %d %s", r.code, r.stderr)
	}
	if r := reviewCLI("history", id, "--data", dir, "--token-file", o.tokenFile); r.code != 2 ||
		!strings.Contains(r.stderr, "--token-file and --ca-file go with --server") {
		t.Fatalf("history --data --token-file: exit %d %s", r.code, r.stderr)
	}
}
