package projections_test

import (
	"encoding/json"
	"net/http"
	"testing"

	"taskledger/node/nodetest"
)

// testdata/admintoken-v1 was written by the release before roles (commit
// 4431093, `taskledger admin-token create ops`, `create audit`, `revoke
// audit`, `snapshot create`, all offline): three admin_token events of
// schema 1 and a snapshot of projection schema 5. The token of "ops" was
// printed then and is kept here.
const (
	rolesFixtureDir = "testdata/admintoken-v1"
	rolesFixtureOps = "tladm_hAPpHT8QRpwR_jR4NIWchwMHOlltJIp1TM7yr16zoG8"
)

// Tokens created before roles existed keep working as admin: the old
// snapshot is refused and the log replays, unchanged, with every token an
// admin one (the nodetest cleanup verifies the log and compares a replay
// with the live projections).
func TestAdminTokensOfTheLogBeforeRolesReplayAsAdmin(t *testing.T) {
	n := nodetest.Start(t, nodetest.WithDir(copyFixtureDir(t, rolesFixtureDir)))
	if n.Head() != 3 {
		t.Fatalf("fixture head %d, want 3", n.Head())
	}
	r := n.Do("GET", nodetest.AdminPath+"/whoami", rolesFixtureOps, nil, nil)
	nodetest.Must(t, r, http.StatusOK)
	if string(r.Body) != `{"name":"ops","role":"admin"}`+"\n" {
		t.Fatalf("whoami: %s", r.Body)
	}
	r = n.Do("GET", nodetest.AdminPath+"/admin-tokens", rolesFixtureOps, nil, nil)
	nodetest.Must(t, r, http.StatusOK)
	var page struct {
		AdminTokens []struct{ Name, Status, Role string } `json:"admin_tokens"`
	}
	if err := json.Unmarshal(r.Body, &page); err != nil {
		t.Fatal(err)
	}
	if len(page.AdminTokens) != 2 || page.AdminTokens[0].Name != "audit" || page.AdminTokens[0].Status != "REVOKED" ||
		page.AdminTokens[0].Role != "admin" || page.AdminTokens[1].Name != "ops" || page.AdminTokens[1].Role != "admin" {
		t.Fatalf("admin tokens: %s", r.Body)
	}
	// The old events show schema 1 and read as admin; a new one is schema 2.
	nodetest.Must(t, n.Do("POST", nodetest.AdminPath+"/admin-tokens", rolesFixtureOps, map[string]any{"name": "aud", "role": "auditor"}, nil), http.StatusCreated)
	r = n.Do("GET", nodetest.AdminPath+"/events", rolesFixtureOps, nil, nil)
	nodetest.Must(t, r, http.StatusOK)
	var evs struct {
		Events []struct {
			Type   string
			Schema int
			Body   map[string]any
		}
	}
	if err := json.Unmarshal(r.Body, &evs); err != nil {
		t.Fatal(err)
	}
	var got []any
	for _, e := range evs.Events {
		if e.Type == "admin_token.created" {
			got = append(got, e.Schema, e.Body["role"])
		}
	}
	if b, _ := json.Marshal(got); string(b) != `[1,"admin",1,"admin",2,"auditor"]` {
		t.Fatalf("admin_token.created schemas and roles: %s", b)
	}
	// After a restart (a snapshot of schema 6 this time) the roles hold.
	if _, err := n.Snapshot(); err != nil {
		t.Fatal(err)
	}
	n2 := n.Restart()
	r = n2.Do("GET", nodetest.AdminPath+"/admin-tokens/aud", rolesFixtureOps, nil, nil)
	nodetest.Must(t, r, http.StatusOK)
	if m := r.JSON(); m["role"] != "auditor" {
		t.Fatalf("aud after restart: %s", r.Body)
	}
}
