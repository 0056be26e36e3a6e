package main

// The operator commands against a real server (nodetest: a ledger on a
// temporary directory served over loopback), run in process through run().

import (
	"encoding/json"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"

	"taskledger/node/nodetest"
)

// opCLI runs the CLI against node n with its admin token in a file.
type opCLI struct {
	t                *testing.T
	n                *nodetest.Node
	tokenFile, owner string
}

func newOpCLI(t *testing.T) *opCLI {
	n := nodetest.Start(t)
	f := filepath.Join(t.TempDir(), "token")
	if err := os.WriteFile(f, []byte(n.AdminToken+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	return &opCLI{t: t, n: n, tokenFile: f, owner: uuid.NewString()}
}

func (o *opCLI) run(args ...string) reviewRun {
	o.t.Helper()
	return reviewCLI(append(args, "--server", o.n.URL, "--token-file", o.tokenFile)...)
}

func (o *opCLI) ok(args ...string) string {
	o.t.Helper()
	r := o.run(args...)
	if r.code != 0 {
		o.t.Fatalf("%v: exit %d\nstdout: %s\nstderr: %s", args, r.code, r.stdout, r.stderr)
	}
	return r.stdout
}

func TestOperatorRunsOneTaskEndToEnd(t *testing.T) {
	o := newOpCLI(t)
	devToken := strings.TrimSpace(o.ok("device", "register", "phone-1", "--owner", o.owner))
	if !strings.HasPrefix(devToken, "tldev_") {
		t.Fatalf("device register printed %q, want the device token", devToken)
	}
	var devs struct {
		Devices []struct {
			DeviceID string `json:"device_id"`
			Name     string `json:"name"`
		} `json:"devices"`
	}
	if err := json.Unmarshal([]byte(o.ok("device", "list", "--json")), &devs); err != nil || len(devs.Devices) != 1 || devs.Devices[0].Name != "phone-1" {
		t.Fatalf("device list --json: %v %+v", err, devs)
	}
	devID := devs.Devices[0].DeviceID
	if out := o.ok("device", "show", devID); !strings.Contains(out, devID) || !strings.Contains(out, "ACTIVE") {
		t.Fatalf("device show: %q", out)
	}
	payloadFile := filepath.Join(t.TempDir(), "payload.json")
	os.WriteFile(payloadFile, []byte(`{"job":"photo"}`), 0o600)
	id := strings.TrimSpace(o.ok("task", "create", "--payload", "@"+payloadFile, "--authorize", "--ttl", "1h"))
	if _, err := uuid.Parse(id); err != nil {
		t.Fatalf("task create printed %q, want the task id", id)
	}
	if out := o.ok("task", "list", "--state", "PENDING"); !strings.Contains(out, id) {
		t.Fatalf("task list --state PENDING misses %s: %q", id, out)
	}

	// The device's side, over the API.
	d := &nodetest.Device{N: o.n, ID: devID, Token: devToken, Session: uuid.NewString()}
	nodetest.Must(t, d.Ready(), 200)
	cr, claimTok := d.Claim()
	nodetest.Must(t, cr, 200)
	gen := nodetest.Num(cr.JSON(), "claim_generation")
	if out := o.ok("task", "list", "--device", devID); !strings.Contains(out, id) || !strings.Contains(out, "CLAIMED") {
		t.Fatalf("task list --device: %q", out)
	}
	sr := d.Call(id, "start", claimTok, map[string]any{"claim_generation": gen, "expected_version": nodetest.Num(cr.JSON(), "version")}, "")
	nodetest.Must(t, sr, 200)
	exec := nodetest.Str(sr.JSON(), "execution_id")
	nodetest.Must(t, d.Call(id, "heartbeat", claimTok, map[string]any{"claim_generation": gen, "execution_id": exec, "step": "shoot"}, ""), 200)
	v := nodetest.Num(o.n.Task(id), "version")
	nodetest.Must(t, d.Call(id, "complete", claimTok, map[string]any{"claim_generation": gen, "execution_id": exec,
		"expected_version": v, "result": map[string]any{"ok": true}}, ""), 200)

	if out := o.ok("task", "show", id); !strings.Contains(out, "SUCCEEDED") {
		t.Fatalf("task show: %q", out)
	}
	var doc map[string]any
	if err := json.Unmarshal([]byte(o.ok("task", "show", id, "--json")), &doc); err != nil || doc["state"] != "SUCCEEDED" {
		t.Fatalf("task show --json: %v %v", err, doc)
	}
	hist := o.ok("task", "history", id)
	for _, typ := range []string{"task.created", "task.claimed", "task.started", "task.completed"} {
		if !strings.Contains(hist, typ) {
			t.Errorf("task history lacks %s:\n%s", typ, hist)
		}
	}
	if h2 := o.ok("history", id); h2 != hist {
		t.Errorf("history --server differs from task history:\n%s\n---\n%s", h2, hist)
	}
	exp := o.ok("export", "--format", "ndjson")
	lines := strings.Split(strings.TrimSpace(exp), "\n")
	if uint64(len(lines)) != o.n.Head() {
		t.Errorf("export --server printed %d lines, head is %d", len(lines), o.n.Head())
	}
	ev := o.ok("events", "--after", "1")
	if got := strings.Split(strings.TrimSpace(ev), "\n"); len(got) != len(lines)-1 || got[0] != lines[1] {
		t.Errorf("events --after 1: %d lines (want %d), first %q want %q", len(got), len(lines)-1, got[0], lines[1])
	}
}

func TestOperatorSteersTasks(t *testing.T) {
	o := newOpCLI(t)
	id := strings.TrimSpace(o.ok("task", "create", "--payload", `{"a":1}`))
	if out := o.ok("task", "authorize", id, "--ttl", "2h"); !strings.Contains(out, "authorization=ACTIVE") {
		t.Fatalf("task authorize: %q", out)
	}
	if out := o.ok("task", "amend", id, "--payload", `{"a":2}`); !strings.Contains(out, "revision=2") {
		t.Fatalf("task amend: %q", out)
	}
	o.ok("task", "authorize", id, "--ttl", "1h")
	if out := o.ok("task", "revoke-authorization", id); !strings.Contains(out, id) || strings.Contains(out, "authorization=ACTIVE") {
		t.Fatalf("task revoke-authorization: %q", out)
	}
	if out := o.ok("task", "cancel", id); !strings.Contains(out, "CANCELED") {
		t.Fatalf("task cancel: %q", out)
	}
	// Refusals exit 1 and name the API's code.
	r := o.run("task", "cancel", id)
	if r.code != 1 || !strings.Contains(r.stderr, "invalid_state") {
		t.Fatalf("cancel of a canceled task: exit %d, stderr %q", r.code, r.stderr)
	}
	r = o.run("task", "show", uuid.NewString())
	if r.code != 1 || !strings.Contains(r.stderr, "task_not_found") {
		t.Fatalf("show of an unknown task: exit %d, stderr %q", r.code, r.stderr)
	}
	r = o.run("task", "authorize", id, "--ttl", "1m")
	if r.code != 1 {
		t.Fatalf("authorize with a too short ttl: exit %d, stderr %q", r.code, r.stderr)
	}
}

func TestOperatorRecoversAndRevokes(t *testing.T) {
	o := newOpCLI(t)
	d := o.n.RegisterDevice()
	id := o.n.CreateTask(nil)
	nodetest.Must(t, d.Ready(), 200)
	cr, tok := d.Claim()
	nodetest.Must(t, cr, 200)
	sr := d.Call(id, "start", tok, map[string]any{"claim_generation": nodetest.Num(cr.JSON(), "claim_generation"),
		"expected_version": nodetest.Num(cr.JSON(), "version")}, "")
	nodetest.Must(t, sr, 200)
	r := o.run("task", "recover", id, "--fail")
	if r.code != 1 || !strings.Contains(r.stderr, "lease_not_expired") {
		t.Fatalf("recover of a live task: exit %d, stderr %q", r.code, r.stderr)
	}
	if r := o.run("task", "recover", id); r.code != 2 {
		t.Fatalf("recover without --fail/--requeue: exit %d", r.code)
	}
	o.n.Advance(10 * time.Minute)
	if out := o.ok("task", "recover", id, "--requeue"); !strings.Contains(out, "PENDING") {
		t.Fatalf("task recover --requeue: %q", out)
	}
	if out := o.ok("device", "revoke", d.ID); !strings.Contains(out, "REVOKED") {
		t.Fatalf("device revoke: %q", out)
	}
	if r := o.n.Do("POST", "/api/v1/device/heartbeat", d.Token, map[string]any{}, nil); r.Status != 401 {
		t.Fatalf("a revoked device's token answered %d", r.Status)
	}
}

func TestOperatorIdempotencyKeyRetries(t *testing.T) {
	o := newOpCLI(t)
	key := uuid.NewString()
	a := strings.TrimSpace(o.ok("task", "create", "--payload", `{"x":1}`, "--idempotency-key", key))
	b := strings.TrimSpace(o.ok("task", "create", "--payload", `{"x":1}`, "--idempotency-key", key))
	c := strings.TrimSpace(o.ok("task", "create", "--payload", `{"x":1}`))
	if a != b || a == c {
		t.Fatalf("same key gave %s and %s; a fresh invocation gave %s", a, b, c)
	}
	if r := o.run("task", "create", "--payload", `{"x":1}`, "--idempotency-key", "not-a-uuid"); r.code != 2 {
		t.Fatalf("a malformed --idempotency-key: exit %d", r.code)
	}
}

func TestOperatorNeedsAToken(t *testing.T) {
	n := nodetest.Start(t)
	t.Setenv("TASKLEDGER_TOKEN", "")
	t.Setenv("TASKLEDGER_TOKEN_FILE", "")
	if r := reviewCLI("task", "list", "--server", n.URL); r.code != 2 || !strings.Contains(r.stderr, "TASKLEDGER_TOKEN") {
		t.Fatalf("no token: exit %d, stderr %q", r.code, r.stderr)
	}
	t.Setenv("TASKLEDGER_TOKEN", "tladm_wrong")
	if r := reviewCLI("task", "list", "--server", n.URL); r.code != 1 || !strings.Contains(r.stderr, "unauthorized") {
		t.Fatalf("a wrong token: exit %d, stderr %q", r.code, r.stderr)
	}
	t.Setenv("TASKLEDGER_TOKEN", n.AdminToken)
	t.Setenv("TASKLEDGER_SERVER", n.URL)
	if r := reviewCLI("task", "list"); r.code != 0 {
		t.Fatalf("token and server from the environment: exit %d, stderr %q", r.code, r.stderr)
	}
}

func TestEveryCommandHelpExitsZero(t *testing.T) {
	for _, args := range [][]string{{"--help"}, {"serve", "--help"}, {"verify", "--help"}, {"history", "--help"},
		{"export", "--help"}, {"snapshot", "--help"}, {"projections", "--help"}, {"bench", "--help"},
		{"task", "--help"}, {"task", "create", "--help"}, {"task", "list", "--help"}, {"task", "show", "--help"},
		{"task", "amend", "--help"}, {"task", "authorize", "--help"}, {"task", "revoke-authorization", "--help"},
		{"task", "cancel", "--help"}, {"task", "recover", "--help"}, {"task", "history", "--help"},
		{"device", "register", "--help"}, {"device", "list", "--help"}, {"device", "show", "--help"},
		{"device", "revoke", "--help"}, {"admin-token", "--help"}, {"admin-token", "list", "--help"},
		{"admin-token", "create", "--help"}, {"admin-token", "revoke", "--help"},
		{"events", "--help"}, {"backup", "--help"}, {"restore", "--help"}, {"version", "--help"}, {"completion", "bash"}, {"completion", "zsh"}} {
		r := reviewCLI(args...)
		if r.code != 0 || len(r.stdout) < 40 {
			t.Errorf("%v: exit %d, stdout %q, stderr %q", args, r.code, r.stdout, r.stderr)
		}
	}
	if r := reviewCLI("serve", "--help"); !strings.Contains(r.stdout, "(env TASKLEDGER_CLAIM_LEASE)") {
		t.Errorf("serve --help does not name the environment variables:\n%s", r.stdout)
	}
	for _, sub := range []string{"create", "revoke", "list"} {
		if r := reviewCLI("admin-token", sub, "--help"); !strings.Contains(r.stdout, "TASKLEDGER_DATA") || !strings.Contains(r.stdout, "TASKLEDGER_SERVER") {
			t.Errorf("admin-token %s --help does not name its environment variables:\n%s", sub, r.stdout)
		}
	}
	if r := reviewCLI("task", "--help"); !strings.Contains(r.stdout, "TASKLEDGER_SERVER") {
		t.Errorf("task --help does not name TASKLEDGER_SERVER:\n%s", r.stdout)
	}
}

func TestAdminTokenHelpNamesDataFlagAndEnv(t *testing.T) {
	for _, verb := range []string{"create", "revoke"} {
		r := reviewCLI("admin-token", verb, "--help")
		if r.code != 0 {
			t.Fatalf("admin-token %s --help: exit %d, stderr %q", verb, r.code, r.stderr)
		}
		for _, want := range []string{"--data", "TASKLEDGER_DATA", "NAME", "stopped ledger"} {
			if !strings.Contains(r.stdout, want) {
				t.Errorf("admin-token %s --help does not say %q:\n%s", verb, want, r.stdout)
			}
		}
		if !strings.Contains(r.stdout, "--data string") {
			t.Errorf("admin-token %s --help lists no --data flag:\n%s", verb, r.stdout)
		}
	}
}

func TestVersionPrintsModuleVersionAndCommit(t *testing.T) {
	a, b := reviewCLI("--version"), reviewCLI("version")
	if a.code != 0 || b.code != 0 || !strings.HasPrefix(a.stdout, "taskledger ") || !strings.Contains(a.stdout, "commit") || a.stdout != b.stdout {
		t.Fatalf("--version %q (exit %d), version %q (exit %d)", a.stdout, a.code, b.stdout, b.code)
	}
}

func TestAdminTokenListOffline(t *testing.T) {
	dir := t.TempDir()
	if r := reviewCLI("admin-token", "create", "ops", "--data", dir); r.code != 0 {
		t.Fatalf("create: %d %s", r.code, r.stderr)
	}
	if r := reviewCLI("admin-token", "create", "spare", "--data", dir); r.code != 0 {
		t.Fatalf("create: %d %s", r.code, r.stderr)
	}
	row := regexp.MustCompile(`(?m)^ops\s+ACTIVE\s+admin\s+log\s+\d{4}-\d\d-\d\dT\S+Z\s+-$`)
	r := reviewCLI("admin-token", "list", "--data", dir)
	if r.code != 0 || !row.MatchString(r.stdout) || strings.Contains(r.stdout, "tladm_") {
		t.Fatalf("list: exit %d, %q %q", r.code, r.stdout, r.stderr)
	}
	if r := reviewCLI("admin-token", "revoke", "ops", "--data", dir); r.code != 0 {
		t.Fatalf("revoke: %d %s", r.code, r.stderr)
	}
	revoked := regexp.MustCompile(`(?m)^ops\s+REVOKED\s+admin\s+log\s+\S+Z\s+\S+Z$`)
	if r := reviewCLI("admin-token", "list", "--data", dir); r.code != 0 || !revoked.MatchString(r.stdout) {
		t.Fatalf("list after revoke: exit %d, %q", r.code, r.stdout)
	}
	// The last active token stays: revoking it would lock every operator out.
	if r := reviewCLI("admin-token", "revoke", "spare", "--data", dir); r.code != 1 || !strings.Contains(r.stderr, "last active") {
		t.Fatalf("revoke the last token: exit %d, %q", r.code, r.stderr)
	}
	if r := reviewCLI("verify", "--data", dir); r.code != 0 {
		t.Fatalf("verify: %d %s", r.code, r.stderr)
	}
}
