package api_test

// Server-issued claim tokens: a claim without X-Claim-Token gets
// an HMAC token the server can reproduce from the log (replays, also after
// a restart), resume returns it, and without a secret such a claim is
// 400 claim_token_required.

import (
	"context"
	"encoding/hex"
	"errors"
	"regexp"
	"strings"
	"testing"

	"github.com/rs/zerolog"

	"taskledger/commands"
	"taskledger/node"
	"taskledger/node/nodetest"
)

var hexToken = regexp.MustCompile(`^[0-9a-f]{64}$`)

// serverToken reads claim.token of a claim answer.
func serverToken(t *testing.T, r *nodetest.Resp) string {
	t.Helper()
	nodetest.Must(t, r, 200)
	tok, _ := nodetest.Obj(r.JSON(), "claim")["token"].(string)
	if !hexToken.MatchString(tok) {
		t.Fatalf("claim.token %q is not 64 lowercase hex: %s", tok, r.Body)
	}
	return tok
}

func TestServerIssuedTokenReplaysAcrossRestart(t *testing.T) {
	secret := nodetest.NewClaimSecret(t)
	n := nodetest.Start(t, nodetest.WithClaimSecret(secret))
	d := n.ReadyDevice(t)
	id := n.CreateTask(nil)
	key := nodetest.NewKey()
	tok := serverToken(t, d.ClaimWith(key, ""))

	detail := n.Admin("GET", "/tasks/"+id, nil)
	if nodetest.Obj(detail.JSON(), "claim")["token_origin"] != "server" {
		t.Fatalf("token_origin: %s", detail.Body)
	}
	nodetest.MustHoldNoSecret(t, "the task detail", detail.Body, tok)
	nodetest.MustHoldNoSecret(t, "the task history", n.Admin("GET", "/tasks/"+id+"/events", nil).Body, tok)
	nodetest.MustHoldNoSecret(t, "the global log", n.Admin("GET", "/events", nil).Body, tok)

	r := d.ClaimWith(key, "")
	if got := serverToken(t, r); got != tok || r.Header.Get("Idempotent-Replayed") != "true" {
		t.Fatalf("replay: token differs or not marked replayed")
	}

	n = n.Restart(nodetest.WithClaimSecret(secret))
	d.N = n
	head := n.Head()
	r = d.ClaimWith(key, "")
	if got := serverToken(t, r); got != tok || r.Header.Get("Idempotent-Replayed") != "true" {
		t.Fatalf("replay after restart: token differs or not marked replayed")
	}
	if n.Head() != head {
		t.Fatal("a replay appended an event")
	}
	// The reproduced token is the claim's token.
	nodetest.Must(t, d.Start(id, nodetest.NewClaimToken(), 1, 2), 403, "claim_token_mismatch")
	nodetest.Must(t, d.Start(id, tok, 1, 2), 200)
}

func TestClaimTokenRequiredWithoutSecret(t *testing.T) {
	n := nodetest.Start(t)
	d := n.ReadyDevice(t)
	head := n.Head()
	nodetest.Must(t, d.ClaimWith(nodetest.NewKey(), ""), 400, "claim_token_required") // even with no task
	if n.Head() != head {
		t.Fatal("a refused claim appended an event")
	}
	id := n.CreateTask(nil)
	head = n.Head()
	key := nodetest.NewKey()
	nodetest.Must(t, d.ClaimWith(key, ""), 400, "claim_token_required")
	if n.Head() != head || n.Task(id)["state"] != "PENDING" {
		t.Fatal("a refused claim changed something")
	}
	// Not recorded: the key works once the request carries a token.
	nodetest.Must(t, d.ClaimWith(key, nodetest.NewClaimToken()), 200)
}

func TestResumeServerIssuedClaim(t *testing.T) {
	n := nodetest.Start(t, nodetest.WithClaimSecret(nodetest.NewClaimSecret(t)))
	d := n.ReadyDevice(t)
	id := n.CreateTask(nil)
	first := d.ClaimWith(nodetest.NewKey(), "")
	tok := serverToken(t, first)

	// Same session, no X-Claim-Token: the same claim and token back.
	r := d.ClaimWith(nodetest.NewKey(), "")
	if got := serverToken(t, r); got != tok {
		t.Fatal("resume returned another token")
	}
	m := r.JSON()
	if nodetest.Num(m, "claim_generation") != 1 || nodetest.Num(m, "version") != 2 ||
		m["lease_expires_at"] != first.JSON()["lease_expires_at"] || nodetest.Str(nodetest.Obj(m, "task"), "id") != id {
		t.Fatalf("resume: %s", r.Body)
	}
	evs := n.Events(t, id)
	if evs[len(evs)-1]["type"] != "task.claim_resumed" {
		t.Fatalf("resume recorded %v", evs[len(evs)-1]["type"])
	}

	head := n.Head()
	// With a client-issued token: not this claim's token.
	nodetest.Must(t, d.ClaimWith(nodetest.NewKey(), nodetest.NewClaimToken()), 403, "claim_token_mismatch")
	// Resuming a server-issued claim carries no token; presenting the
	// server-issued token itself is another token (docs/decisions.md D8).
	nodetest.Must(t, d.ClaimWith(nodetest.NewKey(), tok), 403, "claim_token_mismatch")
	if n.Head() != head {
		t.Fatal("refused resumes appended events")
	}
	// Another session: claim_requires_manual (recorded).
	d.Session = nodetest.NewKey()
	nodetest.Must(t, d.ClaimWith(nodetest.NewKey(), ""), 409, "claim_requires_manual")
	if n.Head() != head+1 {
		t.Fatal("claim_requires_manual was not recorded")
	}
}

func TestResumeClientIssuedClaimOnSecretServer(t *testing.T) {
	n := nodetest.Start(t, nodetest.WithClaimSecret(nodetest.NewClaimSecret(t)))
	d := n.ReadyDevice(t)
	n.CreateTask(nil)
	_, tok, _ := d.MustClaim(t)
	// A client-issued claim resumes only with its own token; without one
	// the server does not issue a token for it.
	nodetest.Must(t, d.ClaimWith(nodetest.NewKey(), ""), 403, "claim_token_mismatch")
	r := d.ClaimWith(nodetest.NewKey(), tok)
	nodetest.Must(t, r, 200)
	if _, has := nodetest.Obj(r.JSON(), "claim")["token"]; has || strings.Contains(string(r.Body), tok) {
		t.Fatalf("a client-issued claim's answer carries a token: %s", r.Body)
	}
}

// Start-up refuses a claim-token secret whose hex text or decoded bytes
// hash to a device token's stored hash. (The real-binary tests cover admin
// tokens; a device token cannot be chosen over HTTP, so this registers the
// device through the sequencer with the hash the api would have computed.)
func TestSecretEqualToADeviceTokenIsRefused(t *testing.T) {
	secret := nodetest.NewClaimSecret(t)
	for name, h := range map[string]string{
		"hex text":      commands.HashToken(hex.EncodeToString(secret)),
		"decoded bytes": commands.HashToken(string(secret)),
	} {
		t.Run(name, func(t *testing.T) {
			n := nodetest.Start(t)
			_, err := n.Engine.Do(context.Background(), &commands.RegisterDevice{
				AdminReq: commands.AdminReq{Operator: "initial", Key: nodetest.NewKey(), Fingerprint: []byte("register")},
				OwnerID:  nodetest.NewKey(), Name: "reused", TokenHash: h})
			if err != nil {
				t.Fatal(err)
			}
			n.Close()
			open := func(secret []byte) (*node.Node, error) {
				cfg := commands.DefaultConfig()
				cfg.ClaimSecret = secret
				return node.Open(node.Config{DataDir: n.Dir, Manual: true, Commands: cfg, SnapshotEvery: 100000, Logger: zerolog.Nop()})
			}
			if _, err := open(secret); !errors.Is(err, node.ErrSecretReused) {
				t.Fatalf("open with a secret equal to a device token: %v, want %v", err, node.ErrSecretReused)
			}
			nd, err := open(nodetest.NewClaimSecret(t))
			if err != nil {
				t.Fatalf("open with another secret: %v", err)
			}
			if err := nd.Close(); err != nil {
				t.Fatal(err)
			}
		})
	}
}
