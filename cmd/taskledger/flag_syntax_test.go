package main

// The command line through the real binary: the spellings the standard
// flag package accepted (-name, -name=value, flags after the arguments)
// still work on the cobra tree, and a mistake in the command line exits 2
// with one stable line naming it and the command's help, changing nothing.

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

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
		{[]string{"agent"}, "taskledger: taskledger agent needs a command: enroll, resolve, run, status (see `taskledger agent --help`)\n"},
		{[]string{"task", "show"}, "taskledger: accepts 1 arg(s), received 0\n"},
		{[]string{"verify", "--data", dir, "--key", "x"}, "taskledger: --key, --token-file and --ca-file go with --server\n"},
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
