package main

// The command line as the operating contract states it
// (operations.md): run() in process, so no binary is built.

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"taskledger/node/nodetest"
)

type reviewRun struct {
	code           int
	stdout, stderr string
}

func reviewCLI(args ...string) reviewRun {
	var out, errb bytes.Buffer
	code := run(args, &out, &errb)
	return reviewRun{code, out.String(), errb.String()}
}

// reviewLedger writes a small ledger (one claimed task) and returns its
// directory and the task id; the node is closed (and its log verified).
func reviewLedger(t *testing.T) (string, string) {
	n := nodetest.Start(t)
	d := n.RegisterDevice()
	if r := d.Ready(); r.Status != 200 {
		t.Fatalf("presence: %d %s", r.Status, r.Body)
	}
	id := n.CreateTask(nil)
	if r, _ := d.Claim(); r.Status != 200 {
		t.Fatalf("claim: %d %s", r.Status, r.Body)
	}
	n.Close()
	return n.Dir, id
}

// operations.md: every subcommand takes --data DIR, and flags may stand
// before or after positional arguments.
func TestCLIFlagsBeforeOrAfterArguments(t *testing.T) {
	dir, id := reviewLedger(t)
	var outs []string
	for _, args := range [][]string{
		{"history", "--data", dir, id},
		{"history", id, "--data", dir},
		{"history", "--data=" + dir, id},
	} {
		r := reviewCLI(args...)
		if r.code != 0 || !strings.Contains(r.stdout, "task.claimed") {
			t.Fatalf("%v: exit %d\n%s%s", args, r.code, r.stdout, r.stderr)
		}
		outs = append(outs, r.stdout)
	}
	if outs[0] != outs[1] || outs[1] != outs[2] {
		t.Fatalf("history differs with the flag's position")
	}
	for _, args := range [][]string{
		{"history", "--json", "--data", dir, id},
		{"history", id, "--json", "--data", dir},
		{"history", "--data", dir, id, "--json"},
	} {
		r := reviewCLI(args...)
		var doc struct {
			Events []map[string]any `json:"events"`
		}
		if r.code != 0 || json.Unmarshal([]byte(r.stdout), &doc) != nil || len(doc.Events) != 2 {
			t.Fatalf("%v: exit %d\n%s%s", args, r.code, r.stdout, r.stderr)
		}
	}
	exp := reviewCLI("export", "--format", "ndjson", "--data", dir)
	if exp.code != 0 {
		t.Fatalf("export: %d %s", exp.code, exp.stderr)
	}
	lines := strings.Split(strings.TrimSpace(exp.stdout), "\n")
	after := reviewCLI("export", "--data", dir, "--after", "1", "--format", "ndjson")
	if after.code != 0 || len(strings.Split(strings.TrimSpace(after.stdout), "\n")) != len(lines)-1 {
		t.Fatalf("export --after 1: %d lines of %d\n%s", len(strings.Split(after.stdout, "\n")), len(lines), after.stderr)
	}
	for _, l := range lines {
		var e map[string]any
		if err := json.Unmarshal([]byte(l), &e); err != nil {
			t.Fatalf("export line %q: %v", l, err)
		}
		for _, f := range []string{"seq", "stream", "stream_version", "type", "schema", "at", "actor", "body"} {
			if _, ok := e[f]; !ok {
				t.Fatalf("export line without %s: %s", f, l)
			}
		}
	}
	for _, args := range [][]string{
		{"verify", "--data", dir},
		{"snapshot", "--data", dir, "create"},
		{"snapshot", "create", "--data", dir},
		{"snapshot", "list", "--data", dir},
		{"projections", "--data", dir, "rebuild"},
		{"projections", "rebuild", "--data", dir},
	} {
		if r := reviewCLI(args...); r.code != 0 {
			t.Fatalf("%v: exit %d\n%s%s", args, r.code, r.stdout, r.stderr)
		}
	}
	if r := reviewCLI("admin-token", "--data", dir, "create", "ops"); r.code != 0 || !strings.HasPrefix(r.stdout, "tladm_") ||
		strings.Count(r.stdout, "\n") != 1 {
		t.Fatalf("admin-token --data D create: %d %q %s", r.code, r.stdout, r.stderr)
	}
	if r := reviewCLI("admin-token", "revoke", "ops", "--data", dir); r.code != 0 || r.stdout != "" {
		t.Fatalf("admin-token revoke NAME --data D: %d %q %s", r.code, r.stdout, r.stderr)
	}
	if r := reviewCLI("verify", "extra", "--data", dir); r.code != 2 {
		t.Fatalf("verify with an argument: exit %d", r.code)
	}
}

// operations.md: admin-token create prints only the token on stdout; a
// revoke never creates a ledger (the first serve would then write no
// initial admin token); names are not limited to [a-z0-9_].
func TestCLIAdminTokens(t *testing.T) {
	empty := t.TempDir()
	r := reviewCLI("admin-token", "revoke", "nobody", "--data", empty)
	if r.code != 1 || !strings.Contains(r.stderr, "no ledger") {
		t.Fatalf("revoke on an empty directory: %d %s", r.code, r.stderr)
	}
	if ents, _ := os.ReadDir(empty); len(ents) != 0 {
		t.Fatalf("revoke on an empty directory wrote %v", ents)
	}
	dir := filepath.Join(t.TempDir(), "data")
	for _, name := range []string{"ci-admin", "alice.smith", "Ops_2"} {
		r = reviewCLI("admin-token", "create", name, "--data", dir)
		if r.code != 0 || !strings.HasPrefix(r.stdout, "tladm_") || len(strings.TrimSpace(r.stdout)) != 6+43 ||
			strings.Contains(r.stderr, strings.TrimSpace(r.stdout)) {
			t.Fatalf("create %s: %d %q %s", name, r.code, r.stdout, r.stderr)
		}
	}
	if r = reviewCLI("admin-token", "create", "ci-admin", "--data", dir); r.code != 1 || r.stdout != "" {
		t.Fatalf("a second create of the same name: %d %q", r.code, r.stdout)
	}
	if r = reviewCLI("admin-token", "revoke", "ci-admin", "--data", dir); r.code != 0 {
		t.Fatalf("revoke: %d %s", r.code, r.stderr)
	}
	for _, name := range []string{"a:b", "", "-x", "with space", strings.Repeat("n", 65)} {
		if r = reviewCLI("admin-token", "create", name, "--data", dir); r.code == 0 {
			t.Fatalf("create %q accepted", name)
		}
	}
	if r = reviewCLI("admin-token", "create", "--data", dir); r.code != 2 {
		t.Fatalf("create without a name: exit %d", r.code)
	}
}

// operations.md, Configuration: every serve flag is validated at start
// with a message naming the setting; TASKLEDGER_… is the fallback.
func TestCLIServeConfiguration(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "data")
	cases := []struct {
		args []string
		want string
	}{
		{[]string{"--claim-lease", "59s"}, "--claim-lease"},
		{[]string{"--claim-lease", "61m", "--authorization-ttl-min", "2h"}, "--claim-lease"},
		{[]string{"--claim-lease", "15m"}, "--claim-lease"}, // not shorter than --authorization-ttl-min 15m
		{[]string{"--running-lease", "29s"}, "--running-lease"},
		{[]string{"--running-lease", "11m"}, "--running-lease"},
		{[]string{"--presence-ttl", "29s"}, "--presence-ttl"},
		{[]string{"--presence-ttl", "10m1s"}, "--presence-ttl"},
		{[]string{"--authorization-ttl-min", "14m"}, "--authorization-ttl-min"},
		{[]string{"--authorization-ttl-max", "721h"}, "--authorization-ttl-max"},
		{[]string{"--idempotency-retention", "59m"}, "--idempotency-retention"},
		{[]string{"--idempotency-retention", "721h"}, "--idempotency-retention"},
		{[]string{"--required-checks", "a,B"}, "--required-checks"},
		{[]string{"--required-checks", "a,b,c,d,e,f,g,h,i,j,k,l,m,n,o,p,q"}, "--required-checks"},
		{[]string{"--snapshot-every", "999"}, "--snapshot-every"},
		{[]string{"--snapshot-every", "10000001"}, "--snapshot-every"},
		{[]string{"--snapshot-every", "5000x"}, "--snapshot-every"},
		{[]string{"--snapshot-every", "0x1000"}, "--snapshot-every"},
		{[]string{"--claim-token-secret", strings.Repeat("A", 64)}, "--claim-token-secret"},
		{[]string{"--listen", "[::]:0"}, "loopback"},
		{[]string{"--clock=fast"}, "--clock"},
		{[]string{"--default-takeover", "Manual"}, "--default-takeover"},
		{[]string{"--default-takeover", ""}, "--default-takeover"},
	}
	// Every run also asks for the manual clock on a public address, which
	// refuses after the configuration: a regression fails, never serves.
	safe := []string{"serve", "--data", dir, "--clock=manual", "--listen", "0.0.0.0:0"}
	for _, c := range cases {
		r := reviewCLI(append(safe, c.args...)...)
		if r.code != 1 || !strings.Contains(r.stderr, c.want) {
			t.Errorf("serve %v: exit %d, stderr %q (want exit 1 naming %s)", c.args, r.code, r.stderr, c.want)
		}
	}
	t.Setenv("TASKLEDGER_DEFAULT_TAKEOVER", "never")
	if r := reviewCLI(safe...); r.code != 1 || !strings.Contains(r.stderr, "--default-takeover") {
		t.Errorf("TASKLEDGER_DEFAULT_TAKEOVER=never: exit %d %q", r.code, r.stderr)
	}
	t.Setenv("TASKLEDGER_DEFAULT_TAKEOVER", "manual")
	t.Setenv("TASKLEDGER_PRESENCE_TTL", "1s")
	if r := reviewCLI(safe...); r.code != 1 || !strings.Contains(r.stderr, "--presence-ttl") {
		t.Errorf("TASKLEDGER_PRESENCE_TTL=1s: exit %d %q", r.code, r.stderr)
	}
	// (with a flag that refuses later, so a regression cannot start serving)
	if r := reviewCLI("serve", "--presence-ttl", "1m", "--data", dir, "extra", "--clock=manual", "--listen", "0.0.0.0:0"); r.code != 2 {
		t.Errorf("serve with an argument: exit %d %q", r.code, r.stderr)
	}
	if _, err := os.Stat(dir); !os.IsNotExist(err) {
		t.Fatalf("refused starts created the data directory: %v", err)
	}
}

// api.md, Test clock: a ledger once served with --clock=manual is marked,
// and serve without the flag refuses it (nothing written).
func TestCLIManualLedgerRefusesWallClock(t *testing.T) {
	n := nodetest.Start(t)
	n.CreateTask(nil)
	n.Close()
	before, err := os.ReadFile(filepath.Join(n.Dir, "taskledger.db"))
	if err != nil {
		t.Fatal(err)
	}
	r := reviewCLI("serve", "--data", n.Dir, "--listen", "127.0.0.1:0")
	if r.code != 1 || !strings.Contains(r.stderr, "--clock=manual") {
		t.Fatalf("serve of a manual ledger without the flag: %d %q", r.code, r.stderr)
	}
	after, _ := os.ReadFile(filepath.Join(n.Dir, "taskledger.db"))
	if !bytes.Equal(before, after) {
		t.Fatalf("the refused start changed the ledger")
	}
}
