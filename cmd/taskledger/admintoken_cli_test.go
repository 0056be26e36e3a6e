package main

import (
	"encoding/hex"
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/rs/zerolog"

	"taskledger/commands"
	"taskledger/node"
	"taskledger/node/nodetest"
)

// admin-token create | list | revoke through a running server: a token
// created is honoured at once, one revoked is refused at once, and the
// ledger verifies afterwards.
func TestOperatorManagesAdminTokensWhileServing(t *testing.T) {
	o := newOpCLI(t)
	r := o.run("admin-token", "create", "ci")
	if r.code != 0 || !regexp.MustCompile(`^tladm_[A-Za-z0-9_-]{43}\n$`).MatchString(r.stdout) {
		t.Fatalf("create: exit %d %q %q", r.code, r.stdout, r.stderr)
	}
	tok := strings.TrimSpace(r.stdout)
	ciFile := filepath.Join(t.TempDir(), "ci")
	if err := os.WriteFile(ciFile, []byte(tok), 0o600); err != nil {
		t.Fatal(err)
	}
	asCI := func(args ...string) reviewRun {
		return reviewCLI(append(args, "--server", o.n.URL, "--token-file", ciFile)...)
	}
	if r := asCI("device", "list"); r.code != 0 {
		t.Fatalf("the new token is not honoured: exit %d %s", r.code, r.stderr)
	}
	list := o.ok("admin-token", "list")
	for _, want := range []string{`(?m)^initial\s+ACTIVE\s+admin\s+data_dir\s+-\s+-$`, `(?m)^ci\s+ACTIVE\s+admin\s+log\s+\S+Z\s+-$`} {
		if !regexp.MustCompile(want).MatchString(list) {
			t.Errorf("list lacks %s:\n%s", want, list)
		}
	}
	if strings.Contains(list, tok) {
		t.Fatalf("list shows a token")
	}
	if r := o.run("admin-token", "create", "ci"); r.code != 1 || !strings.Contains(r.stderr, "admin_token_exists") {
		t.Fatalf("create twice: exit %d %q", r.code, r.stderr)
	}
	if r := o.run("admin-token", "revoke", "nobody"); r.code != 1 || !strings.Contains(r.stderr, "admin_token_not_found") {
		t.Fatalf("revoke unknown: exit %d %q", r.code, r.stderr)
	}
	o.ok("admin-token", "revoke", "ci", "--reason", "rotated")
	if r := asCI("device", "list"); r.code != 1 || !strings.Contains(r.stderr, "unauthorized") {
		t.Fatalf("the revoked token is still honoured: exit %d %s", r.code, r.stderr)
	}
	var doc struct {
		AdminTokens []map[string]string `json:"admin_tokens"`
	}
	if err := json.Unmarshal([]byte(o.ok("admin-token", "list", "--json")), &doc); err != nil || len(doc.AdminTokens) != 2 ||
		doc.AdminTokens[0]["name"] != "ci" || doc.AdminTokens[0]["status"] != "REVOKED" || doc.AdminTokens[0]["revoke_reason"] != "rotated" {
		t.Fatalf("list --json: %v %+v", err, doc)
	}
	if out := o.ok("verify"); !strings.HasPrefix(out, "ok: ") {
		t.Fatalf("verify --server: %q", out)
	}
}

// verify --server reads every envelope through the API and checks the
// chain here: it passes on the server's log and names the first seq of a
// log whose bytes were changed on the way.
func TestVerifyServerChecksTheChainHere(t *testing.T) {
	o := newOpCLI(t)
	d := o.n.RegisterDevice()
	run := o.n.StartTask(t, d, map[string]any{"job": "x"})
	nodetest.Must(t, run.Complete(map[string]any{"ok": true}), http.StatusOK)
	for range 3 {
		o.n.CreateTask(map[string]any{"more": true})
	}
	out := o.ok("verify")
	if want := "ok: " + strconv.FormatUint(o.n.Head(), 10) + " events, head seq " + strconv.FormatUint(o.n.Head(), 10); !strings.HasPrefix(out, want) {
		t.Fatalf("verify --server: %q, want prefix %q", out, want)
	}
	key := strings.TrimSpace(reviewCLI("checkpoint-key", "export", "--data", o.n.Dir).stdout)
	if key == "" {
		t.Fatal("no checkpoint key")
	}
	// A checkpoint is signed by audit-bundle; then verify --key checks it.
	if r := o.run("audit-bundle", "--task", run.TaskID, "--out", filepath.Join(t.TempDir(), "b.json")); r.code != 0 {
		t.Fatalf("audit-bundle: %d %s", r.code, r.stderr)
	}
	if out := o.ok("verify", "--key", key); !strings.Contains(out, "signed checkpoint of size") {
		t.Fatalf("verify --key: %q", out)
	}

	// A server whose envelope of seq 3 has one byte changed.
	bad := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		r := o.n.Do("GET", req.URL.RequestURI(), o.n.AdminToken, nil, nil)
		var page struct {
			Envelopes []struct {
				Seq      uint64 `json:"seq"`
				Envelope []byte `json:"envelope"`
			} `json:"envelopes"`
			NextAfter uint64 `json:"next_after"`
		}
		if err := json.Unmarshal(r.Body, &page); err != nil {
			t.Error(err)
		}
		for i := range page.Envelopes {
			if page.Envelopes[i].Seq == 3 {
				env := page.Envelopes[i].Envelope
				env[len(env)-2] ^= 1
			}
		}
		_ = json.NewEncoder(w).Encode(page)
	}))
	defer bad.Close()
	r := reviewCLI("verify", "--server", bad.URL, "--token-file", o.tokenFile)
	if r.code != 1 || !strings.Contains(r.stderr, "verify FAILED: seq 3") {
		t.Fatalf("verify of a changed log: exit %d %q %q", r.code, r.stdout, r.stderr)
	}
}

// admin-token create --role: an auditor's token reads and changes nothing;
// an unknown role is a usage error and creates nothing.
func TestOperatorCreatesAnAuditorToken(t *testing.T) {
	o := newOpCLI(t)
	r := o.run("admin-token", "create", "aud", "--role", "auditor")
	if r.code != 0 || !strings.Contains(r.stderr, `"aud" (auditor) created`) {
		t.Fatalf("create --role auditor: exit %d %q", r.code, r.stderr)
	}
	file := filepath.Join(t.TempDir(), "aud")
	if err := os.WriteFile(file, []byte(strings.TrimSpace(r.stdout)), 0o600); err != nil {
		t.Fatal(err)
	}
	asAud := func(args ...string) reviewRun {
		return reviewCLI(append(args, "--server", o.n.URL, "--token-file", file)...)
	}
	if r := asAud("device", "list"); r.code != 0 {
		t.Fatalf("auditor device list: exit %d %s", r.code, r.stderr)
	}
	before := o.n.Head()
	if r := asAud("admin-token", "create", "mine"); r.code != 1 || !strings.Contains(r.stderr, "insufficient_role") {
		t.Fatalf("auditor creates a token: exit %d %q", r.code, r.stderr)
	}
	if r := o.run("admin-token", "create", "x", "--role", "root"); r.code != 2 || !strings.Contains(r.stderr, "--role must be") {
		t.Fatalf("--role root: exit %d %q", r.code, r.stderr)
	}
	o.n.MustUnchanged(t, before)
	if list := o.ok("admin-token", "list"); !regexp.MustCompile(`(?m)^aud\s+ACTIVE\s+auditor\s+log\s`).MatchString(list) {
		t.Fatalf("list:\n%s", list)
	}
}

// The offline admin-token commands decide nothing about claims: a ledger
// that runs with server-issued claim tokens takes them without its secret.
func TestOfflineAdminTokenNeedsNoClaimSecret(t *testing.T) {
	secret := make([]byte, 32)
	for i := range secret {
		secret[i] = byte(i + 1)
	}
	n := nodetest.Start(t, nodetest.WithConfig(func(c *commands.Config) { c.ClaimSecret = secret }))
	d := n.RegisterDevice()
	nodetest.Must(t, d.Ready(), http.StatusOK)
	id := n.CreateTask(map[string]any{"job": 1})
	nodetest.Must(t, n.Do("POST", "/api/v1/admin/tasks/"+id+"/authorize", n.AdminToken,
		map[string]any{"expected_revision": 1, "ttl_seconds": 3600}, nil), http.StatusOK)
	nodetest.Must(t, d.ClaimWith(nodetest.NewKey(), ""), http.StatusOK) // a server-issued claim token
	n.Close()
	if r := reviewCLI("admin-token", "create", "ops", "--data", n.Dir); r.code != 0 {
		t.Fatalf("create: exit %d %s", r.code, r.stderr)
	}
	if r := reviewCLI("admin-token", "revoke", "ops", "--data", n.Dir); r.code != 0 {
		t.Fatalf("revoke: exit %d %s", r.code, r.stderr)
	}
	// serve still refuses to start without the secret.
	if _, err := node.Open(node.Config{DataDir: n.Dir, Manual: true, Commands: commands.DefaultConfig(), Logger: zerolog.Nop()}); !errors.Is(err, node.ErrNoSecret) {
		t.Fatalf("open without the secret: %v, want %v", err, node.ErrNoSecret)
	}
	if r := reviewCLI("verify", "--data", n.Dir, "--claim-token-secret", hex.EncodeToString(secret)); r.code != 0 {
		t.Fatalf("verify: %d %s", r.code, r.stderr)
	}
}
