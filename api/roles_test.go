package api_test

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"slices"
	"sort"
	"strings"
	"testing"

	"taskledger/api"
	"taskledger/node/nodetest"
	"taskledger/wire"
)

// adminOp is one admin operation of the OpenAPI document and the roles
// its x-roles allow.
type adminOp struct {
	method, path string // path as in the document: /api/v1/admin/tasks/{task_id}
	roles        []wire.Role
}

// documentAdminOps reads every operation secured by an admin token from
// api/openapi.json.
func documentAdminOps(t *testing.T) []adminOp {
	t.Helper()
	var doc struct {
		Paths map[string]map[string]json.RawMessage `json:"paths"`
	}
	if err := json.Unmarshal(api.OpenAPI, &doc); err != nil {
		t.Fatal(err)
	}
	var ops []adminOp
	for path, item := range doc.Paths {
		for method, raw := range item {
			var op struct {
				Security []map[string][]string `json:"security"`
				Roles    []wire.Role           `json:"x-roles"`
			}
			if json.Unmarshal(raw, &op) != nil {
				continue // "parameters" and the like
			}
			admin := slices.ContainsFunc(op.Security, func(s map[string][]string) bool { _, ok := s["admin"]; return ok })
			if !admin {
				continue
			}
			if len(op.Roles) == 0 {
				t.Errorf("%s %s: an admin operation without x-roles", method, path)
			}
			ops = append(ops, adminOp{strings.ToUpper(method), path, op.Roles})
		}
	}
	sort.Slice(ops, func(i, j int) bool { return ops[i].path+ops[i].method < ops[j].path+ops[j].method })
	return ops
}

// echoPath turns a document path into the server's route path.
func echoPath(p string) string {
	for doc, route := range map[string]string{"{task_id}": ":id", "{device_id}": ":id", "{evidence_id}": ":eid", "{name}": ":name"} {
		p = strings.ReplaceAll(p, doc, route)
	}
	return p
}

// roleTokens creates an admin token of every role and returns them by role.
func roleTokens(t *testing.T, n *nodetest.Node) map[wire.Role]string {
	t.Helper()
	toks := map[wire.Role]string{}
	for _, r := range wire.AllRoles() {
		res := n.Do("POST", adminTokensPath, n.AdminToken, map[string]any{"name": "as-" + string(r), "role": r}, nil)
		nodetest.Must(t, res, http.StatusCreated)
		if got := nodetest.Str(res.JSON(), "role"); got != string(r) {
			t.Fatalf("created %s with role %q", r, got)
		}
		toks[r] = nodetest.Str(res.JSON(), "token")
	}
	return toks
}

// sendAs is nodetest's Do that also works on the event stream: it returns
// once the answer's headers (and, unless it is a stream, its body) arrived.
func sendAs(t *testing.T, n *nodetest.Node, method, path, token string, body any) *nodetest.Resp {
	t.Helper()
	if !strings.HasSuffix(path, "/events/stream") {
		return n.Do(method, path, token, body, nil)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, method, n.URL+path, nil)
	req.Header.Set("Authorization", "Bearer "+token)
	res, err := n.HTTP.Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v", method, path, err)
	}
	defer res.Body.Close()
	r := &nodetest.Resp{Status: res.StatusCode, Header: res.Header}
	if !strings.HasPrefix(res.Header.Get("Content-Type"), "text/event-stream") {
		r.Body, _ = io.ReadAll(res.Body)
	}
	return r
}

// TestRoleMatrix walks every admin operation of the OpenAPI document with
// a token of every role: a role the operation's x-roles names gets past
// authorization (whatever the request then answers), any other is refused
// 403 insufficient_role and the log does not move. The requests carry
// bodies that would succeed, so a refusal is what stops them.
func TestRoleMatrix(t *testing.T) {
	n := nodetest.Start(t)
	toks := roleTokens(t, n)
	nodetest.Must(t, n.Do("POST", adminTokensPath, n.AdminToken, map[string]any{"name": "victim"}, nil), http.StatusCreated)
	dev := n.RegisterDevice()
	task := n.CreateTask(map[string]any{"k": 1})
	bodies := map[string]any{
		"POST /api/v1/admin/devices":                        map[string]any{"owner_id": nodetest.NewID(), "name": "m"},
		"POST /api/v1/admin/devices/:id/revoke":             map[string]any{"reason": "r"},
		"POST /api/v1/admin/tasks":                          map[string]any{"payload": map[string]any{"k": 2}},
		"POST /api/v1/admin/tasks/:id/cancel":               map[string]any{"reason": "r"},
		"POST /api/v1/admin/tasks/:id/amend":                map[string]any{"expected_revision": 1, "payload": map[string]any{"k": 3}},
		"POST /api/v1/admin/tasks/:id/authorize":            map[string]any{"expected_revision": 1, "ttl_seconds": 600},
		"POST /api/v1/admin/tasks/:id/recover":              map[string]any{"decision": "fail", "reason": "r", "expected_version": 1},
		"POST /api/v1/admin/admin-tokens":                   map[string]any{"name": "made", "role": "auditor"},
		"POST /api/v1/admin/admin-tokens/:name/revoke":      map[string]any{"reason": "r"},
		"POST /api/v1/admin/test-clock/advance":             map[string]any{"seconds": 1},
		"POST /api/v1/admin/tasks/:id/authorization/revoke": map[string]any{"reason": "r"},
	}
	ops := documentAdminOps(t)
	if len(ops) < len(api.RouteRoles()) {
		t.Fatalf("only %d admin operations in the document", len(ops))
	}
	table := api.RouteRoles()
	for _, op := range ops {
		route := op.method + " " + echoPath(op.path)
		if got := table[route]; !slices.Equal(got, op.roles) {
			t.Errorf("%s: the server's table allows %v, the document %v", route, got, op.roles)
		}
		delete(table, route)
		path := strings.NewReplacer("{task_id}", task, "{device_id}", dev.ID, "{evidence_id}", nodetest.NewID(), "{name}", "victim").Replace(op.path)
		body := bodies[route]
		if body == nil && (op.method == "POST" || op.method == "PUT") {
			body = map[string]any{}
		}
		// The refused roles first, so that the state they would change is intact.
		for _, r := range []wire.Role{wire.RoleAuditor, wire.RoleOperator, wire.RoleAdmin} {
			before := n.Head()
			res := sendAs(t, n, op.method, path, toks[r], body)
			if slices.Contains(op.roles, r) {
				if res.Status == http.StatusUnauthorized || (res.Status == http.StatusForbidden && strings.Contains(string(res.Body), "insufficient_role")) {
					t.Errorf("%s as %s: allowed by the table, answered %d %s", route, r, res.Status, res.Body)
				}
				continue
			}
			if res.Status != http.StatusForbidden || nodetest.Str(res.JSON(), "code") != "insufficient_role" {
				t.Errorf("%s as %s: %d %s, want 403 insufficient_role", route, r, res.Status, res.Body)
			}
			if n.Head() != before {
				t.Errorf("%s as %s: refused, yet the log moved from %d to %d", route, r, before, n.Head())
			}
		}
	}
	for route := range table {
		t.Errorf("%s: in the role table but not an admin operation of the document", route)
	}
}

// Every admin route the server registers is in the role table (a route
// missing from it would be refused to every role).
func TestEveryAdminRouteHasRoles(t *testing.T) {
	n := nodetest.Start(t)
	table := api.RouteRoles()
	seen := 0
	for _, r := range n.API.Echo().Routes() {
		if !strings.HasPrefix(r.Path, "/api/v1/admin/") || r.Method == "echo_route_any" || strings.HasPrefix(r.Method, "echo_") {
			continue
		}
		seen++
		if len(table[r.Method+" "+r.Path]) == 0 {
			t.Errorf("%s %s: no roles in the table", r.Method, r.Path)
		}
	}
	if seen < len(table) {
		t.Fatalf("%d admin routes registered, %d in the table", seen, len(table))
	}
}

// whoami names the caller's token and role; an auditor reads everything
// it needs to audit; an unknown role is refused and changes nothing.
func TestRolesOfAdminTokens(t *testing.T) {
	n := nodetest.Start(t)
	toks := roleTokens(t, n)
	for r, tok := range toks {
		res := n.Do("GET", nodetest.AdminPath+"/whoami", tok, nil, nil)
		nodetest.Must(t, res, http.StatusOK)
		if string(res.Body) != `{"name":"as-`+string(r)+`","role":"`+string(r)+`"}`+"\n" {
			t.Errorf("whoami as %s: %s", r, res.Body)
		}
	}
	res := n.Do("GET", nodetest.AdminPath+"/whoami", n.AdminToken, nil, nil)
	if string(res.Body) != `{"name":"initial","role":"admin"}`+"\n" {
		t.Errorf("whoami as the initial token: %s", res.Body)
	}

	task := n.CreateTask(map[string]any{"k": 1})
	dev := n.RegisterDevice()
	for _, p := range []string{"/tasks", "/tasks/" + task, "/tasks/" + task + "/events", "/tasks/" + task + "/provenance",
		"/devices", "/devices/" + dev.ID, "/events", "/log"} {
		nodetest.Must(t, n.Do("GET", nodetest.AdminPath+p, toks[wire.RoleAuditor], nil, nil), http.StatusOK)
	}
	nodetest.Must(t, n.Do("GET", "/api/v1/checkpoint", "", nil, nil), http.StatusOK)

	before := n.Head()
	for _, bad := range []any{"root", "", "Admin", 1} {
		n.MustRefuse(t, before, n.Do("POST", adminTokensPath, n.AdminToken, map[string]any{"name": "x", "role": bad}, nil),
			http.StatusBadRequest, map[bool]string{true: "unknown_role", false: "invalid_request"}[bad != 1])
	}
	// An operator neither revokes nor replaces an admin token.
	n.MustRefuse(t, before, n.Do("POST", adminTokensPath+"/initial/revoke", toks[wire.RoleOperator], map[string]any{"reason": "x"}, nil),
		http.StatusForbidden, "insufficient_role")
	n.MustRefuse(t, before, n.Do("POST", adminTokensPath, toks[wire.RoleOperator], map[string]any{"name": "as-admin2", "role": "operator"}, nil),
		http.StatusForbidden, "insufficient_role")
	// A request that matches no route is answered as for any token.
	nodetest.MustError(t, n.Do("GET", nodetest.AdminPath+"/nothing-here", toks[wire.RoleAuditor], nil, nil), http.StatusNotFound, "not_found")
	nodetest.MustError(t, n.Do("DELETE", nodetest.AdminPath+"/admin-tokens", toks[wire.RoleAuditor], nil, nil), http.StatusMethodNotAllowed, "method_not_allowed")
	// An operator works tasks; an auditor does not.
	n.MustRefuse(t, before, n.Do("POST", nodetest.AdminPath+"/tasks/"+task+"/cancel", toks[wire.RoleAuditor], map[string]any{"reason": "x"}, nil),
		http.StatusForbidden, "insufficient_role")
	nodetest.Must(t, n.Do("POST", nodetest.AdminPath+"/tasks/"+task+"/cancel", toks[wire.RoleOperator], map[string]any{"reason": "x"}, nil), http.StatusOK)
	if ev := n.Events(t, task); nodetest.Str(ev[len(ev)-1]["actor"].(map[string]any), "id") != "as-operator" {
		t.Fatalf("cancel stamped by %v", ev[len(ev)-1]["actor"])
	}
}
