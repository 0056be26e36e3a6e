package api_test

import (
	"encoding/json"
	"net/http"
	"strconv"
	"strings"
	"testing"

	"taskledger/node/nodetest"
)

const adminTokensPath = nodetest.AdminPath + "/admin-tokens"

// A token created through the API is honoured by the next request, one
// revoked is refused by the next request, and neither needs a restart.
func TestAdminTokenCreatedAndRevokedWhileServing(t *testing.T) {
	n := nodetest.Start(t)
	r := n.Do("POST", adminTokensPath, n.AdminToken, map[string]any{"name": "ci"}, nil)
	nodetest.Must(t, r, http.StatusCreated)
	m := r.JSON()
	tok := nodetest.Str(m, "token")
	if !strings.HasPrefix(tok, "tladm_") || nodetest.Str(m, "name") != "ci" || nodetest.Str(m, "status") != "ACTIVE" ||
		nodetest.Str(m, "origin") != "log" || nodetest.Str(m, "created_by") != "initial" {
		t.Fatalf("create: %s", r.Body)
	}
	nodetest.Must(t, n.Do("GET", nodetest.AdminPath+"/devices", tok, nil, nil), http.StatusOK)

	// The new token acts, and is stamped on its events by name.
	nodetest.Must(t, n.Do("POST", nodetest.AdminPath+"/devices", tok, map[string]any{"owner_id": nodetest.NewID(), "name": "p"}, nil), http.StatusCreated)
	r = n.Do("POST", adminTokensPath+"/ci/revoke", n.AdminToken, map[string]any{"reason": "rotated"}, nil)
	nodetest.Must(t, r, http.StatusOK)
	if m := r.JSON(); nodetest.Str(m, "status") != "REVOKED" || nodetest.Str(m, "revoke_reason") != "rotated" ||
		nodetest.Str(m, "revoked_by") != "initial" || m["token"] != nil {
		t.Fatalf("revoke: %s", r.Body)
	}
	nodetest.MustUnauthorized(t, n.Do("GET", nodetest.AdminPath+"/devices", tok, nil, nil))

	// The history names both events; no token or hash is in any answer.
	r = n.Do("GET", nodetest.AdminPath+"/events", n.AdminToken, nil, nil)
	nodetest.Must(t, r, http.StatusOK)
	var page struct {
		Events []struct {
			Type   string
			Stream string
			Actor  map[string]any
		}
	}
	if err := json.Unmarshal(r.Body, &page); err != nil {
		t.Fatal(err)
	}
	var types []string
	for _, e := range page.Events {
		if strings.HasPrefix(e.Type, "admin_token.") {
			types = append(types, e.Type+" "+e.Stream)
		}
	}
	if strings.Join(types, ",") != "admin_token.created admin-token/ci,admin_token.revoked admin-token/ci" {
		t.Fatalf("admin token events: %v", types)
	}
	if strings.Contains(string(r.Body), tok) || strings.Contains(string(r.Body), "token_sha256") {
		t.Fatalf("the event documents show the token or its hash: %s", r.Body)
	}

	// A name revoked can be created again; the new token works, the old does not.
	r = n.Do("POST", adminTokensPath, n.AdminToken, map[string]any{"name": "ci"}, nil)
	nodetest.Must(t, r, http.StatusCreated)
	tok2 := nodetest.Str(r.JSON(), "token")
	nodetest.Must(t, n.Do("GET", nodetest.AdminPath+"/devices", tok2, nil, nil), http.StatusOK)
	nodetest.MustUnauthorized(t, n.Do("GET", nodetest.AdminPath+"/devices", tok, nil, nil))

	// After a restart (snapshot or replay) the same tokens hold.
	n2 := n.Restart()
	nodetest.Must(t, n2.Do("GET", nodetest.AdminPath+"/devices", tok2, nil, nil), http.StatusOK)
	nodetest.MustUnauthorized(t, n2.Do("GET", nodetest.AdminPath+"/devices", tok, nil, nil))
	if _, err := n2.Snapshot(); err != nil {
		t.Fatal(err)
	}
	n3 := n2.Restart()
	nodetest.Must(t, n3.Do("GET", nodetest.AdminPath+"/devices", tok2, nil, nil), http.StatusOK)
	nodetest.MustUnauthorized(t, n3.Do("GET", nodetest.AdminPath+"/devices", tok, nil, nil))
}

// The initial token lives beside the log; it is listed, and revoking it
// through the API is an event that the server honours at once.
func TestInitialAdminTokenRevokedThroughTheLog(t *testing.T) {
	n := nodetest.Start(t)
	r := n.Do("GET", adminTokensPath, n.AdminToken, nil, nil)
	nodetest.Must(t, r, http.StatusOK)
	if string(r.Body) != `{"admin_tokens":[{"name":"initial","origin":"data_dir","role":"admin","status":"ACTIVE"}]}`+"\n" {
		t.Fatalf("list: %s", r.Body)
	}
	before := n.Head()
	n.MustRefuse(t, before, n.Do("POST", adminTokensPath+"/initial/revoke", n.AdminToken, map[string]any{"reason": "x"}, nil),
		http.StatusConflict, "last_admin_token")

	tok := nodetest.Str(n.Do("POST", adminTokensPath, n.AdminToken, map[string]any{"name": "ops"}, nil).JSON(), "token")
	nodetest.Must(t, n.Do("POST", adminTokensPath+"/initial/revoke", tok, map[string]any{"reason": "bootstrap done"}, nil), http.StatusOK)
	nodetest.MustUnauthorized(t, n.Do("GET", adminTokensPath, n.AdminToken, nil, nil))
	r = n.Do("GET", adminTokensPath+"/initial", tok, nil, nil)
	nodetest.Must(t, r, http.StatusOK)
	if m := r.JSON(); nodetest.Str(m, "status") != "REVOKED" || nodetest.Str(m, "origin") != "data_dir" || nodetest.Str(m, "revoked_by") != "ops" {
		t.Fatalf("initial after revocation: %s", r.Body)
	}
	n2 := n.Restart()
	nodetest.MustUnauthorized(t, n2.Do("GET", adminTokensPath, n2.AdminToken, nil, nil))
	nodetest.Must(t, n2.Do("GET", adminTokensPath, tok, nil, nil), http.StatusOK)
}

// Every refusal of the admin token routes has its code and appends nothing.
func TestAdminTokenRefusals(t *testing.T) {
	n := nodetest.Start(t)
	first := n.Do("POST", adminTokensPath, n.AdminToken, map[string]any{"name": "ops"}, map[string]string{"Idempotency-Key": "5b0f3e5e-8c7b-4a4e-9d7a-0c1d2e3f4a5b"})
	nodetest.Must(t, first, http.StatusCreated)
	before := n.Head()

	again := n.Do("POST", adminTokensPath, n.AdminToken, map[string]any{"name": "ops"}, map[string]string{"Idempotency-Key": "5b0f3e5e-8c7b-4a4e-9d7a-0c1d2e3f4a5b"})
	nodetest.Must(t, again, http.StatusCreated)
	if again.Header.Get("Idempotent-Replayed") != "true" || again.JSON()["token"] != nil {
		t.Fatalf("a replayed creation must not show the token again: %v %s", again.Header, again.Body)
	}
	n.MustUnchanged(t, before)
	for _, tc := range []struct {
		path   string
		body   any
		status int
		code   string
	}{
		{adminTokensPath, map[string]any{"name": "ops"}, http.StatusConflict, "admin_token_exists"},
		{adminTokensPath, map[string]any{"name": "initial"}, http.StatusConflict, "admin_token_exists"},
		{adminTokensPath, map[string]any{"name": "-bad"}, http.StatusBadRequest, "invalid_request"},
		{adminTokensPath, map[string]any{"name": strings.Repeat("a", 65)}, http.StatusBadRequest, "invalid_request"},
		{adminTokensPath, map[string]any{"name": "x", "token": "mine"}, http.StatusBadRequest, "invalid_request"},
		{adminTokensPath, map[string]any{}, http.StatusBadRequest, "invalid_request"},
		{adminTokensPath + "/nobody/revoke", map[string]any{"reason": "x"}, http.StatusNotFound, "admin_token_not_found"},
		{adminTokensPath + "/ops/revoke", map[string]any{}, http.StatusBadRequest, "invalid_request"},
		{adminTokensPath + "/ops/revoke", map[string]any{"reason": strings.Repeat("r", 257)}, http.StatusBadRequest, "invalid_request"},
	} {
		n.MustRefuse(t, before, n.Do("POST", tc.path, n.AdminToken, tc.body, nil), tc.status, tc.code)
	}
	nodetest.MustError(t, n.Do("GET", adminTokensPath+"/nobody", n.AdminToken, nil, nil), http.StatusNotFound, "admin_token_not_found")
	nodetest.MustError(t, n.Do("GET", adminTokensPath+"?x=1", n.AdminToken, nil, nil), http.StatusBadRequest, "invalid_request")

	// A device token never reaches these routes.
	d := n.RegisterDevice()
	nodetest.MustError(t, n.Do("GET", adminTokensPath, d.Token, nil, nil), http.StatusForbidden, "wrong_credential_kind")
}

// GET /admin/log pages through the stored envelopes in seq order.
func TestRawLogPagesThroughEnvelopes(t *testing.T) {
	n := nodetest.Start(t)
	for range 3 {
		n.CreateTask(map[string]any{"k": "v"})
	}
	var seqs []uint64
	after := uint64(0)
	for {
		r := n.Do("GET", nodetest.AdminPath+"/log?limit=2&after="+strconv.FormatUint(after, 10), n.AdminToken, nil, nil)
		nodetest.Must(t, r, http.StatusOK)
		var page struct {
			Envelopes []struct {
				Seq      uint64
				Envelope []byte
			}
			NextAfter uint64 `json:"next_after"`
		}
		if err := json.Unmarshal(r.Body, &page); err != nil {
			t.Fatal(err)
		}
		if len(page.Envelopes) == 0 {
			if page.NextAfter != after {
				t.Fatalf("an empty page moved next_after from %d to %d", after, page.NextAfter)
			}
			break
		}
		for _, e := range page.Envelopes {
			if len(e.Envelope) == 0 {
				t.Fatalf("seq %d: empty envelope", e.Seq)
			}
			seqs = append(seqs, e.Seq)
		}
		after = page.NextAfter
	}
	if len(seqs) != int(n.Head()) || seqs[0] != 1 || seqs[len(seqs)-1] != n.Head() {
		t.Fatalf("pages gave seqs %v, head %d", seqs, n.Head())
	}
	for _, q := range []string{"?limit=0", "?limit=1001", "?after=-1", "?x=1"} {
		nodetest.MustError(t, n.Do("GET", nodetest.AdminPath+"/log"+q, n.AdminToken, nil, nil), http.StatusBadRequest, "invalid_request")
	}
}
