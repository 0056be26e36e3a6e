package api_test

// Contract details outside the other files: metrics listing, the test
// clock route, evidence of unknown tasks, layouts, times, validation.

import (
	"encoding/json"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"taskledger/node/nodetest"
)

// api.md, Operational routes: /metrics lists at least these series, also
// on a server that has not sequenced a single command yet.
func TestMetricsListedFromTheStart(t *testing.T) {
	n := nodetest.Start(t, nodetest.WithWallClock())
	r := n.Do("GET", "/metrics", "", nil, nil)
	nodetest.Must(t, r, http.StatusOK)
	for _, name := range []string{"taskledger_append_batch_size", "taskledger_append_commit_seconds",
		"taskledger_commands_total", "taskledger_claims_total", "taskledger_replay_seconds"} {
		if !strings.Contains(string(r.Body), "# TYPE "+name+" ") {
			t.Errorf("/metrics of a fresh server does not list %s", name)
		}
	}
	if !strings.Contains(string(r.Body), `taskledger_commands_total{outcome="ok",type="claim-next"} 0`) {
		t.Errorf("taskledger_commands_total does not start at zero for claim-next")
	}
}

// api.md, Test clock: without --clock=manual the route does not exist
// (404) — with or without a credential, and nothing is appended.
func TestTestClockAbsentWithoutFlag(t *testing.T) {
	w := nodetest.Start(t, nodetest.WithWallClock())
	h := w.Head()
	for _, tok := range []string{"", w.AdminToken} {
		r := w.Do("POST", nodetest.AdminPath+"/test-clock/advance", tok, map[string]any{"seconds": 60}, nil)
		nodetest.MustError(t, r, http.StatusNotFound, "not_found")
	}
	w.MustUnchanged(t, h)

	// With the flag: no Idempotency-Key needed (one sent is ignored, even
	// a malformed one), bounds 1..86400.
	n := nodetest.Start(t)
	nodetest.Must(t, n.Do("POST", nodetest.AdminPath+"/test-clock/advance", n.AdminToken, map[string]any{"seconds": 1},
		map[string]string{"Idempotency-Key": ""}), http.StatusOK)
	nodetest.Must(t, n.Do("POST", nodetest.AdminPath+"/test-clock/advance", n.AdminToken, map[string]any{"seconds": 1},
		map[string]string{"Idempotency-Key": "not-a-key"}), http.StatusOK)
	for _, secs := range []any{0, -1, 86401, 1.5, "60"} {
		nodetest.MustError(t, n.Do("POST", nodetest.AdminPath+"/test-clock/advance", n.AdminToken, map[string]any{"seconds": secs}, nil),
			http.StatusBadRequest, "invalid_request")

	}
	nodetest.MustUnauthorized(t, n.Do("POST", nodetest.AdminPath+"/test-clock/advance", "", map[string]any{"seconds": 1}, nil))
	d := n.RegisterDevice()
	nodetest.MustError(t, n.Do("POST", nodetest.AdminPath+"/test-clock/advance", d.Token, map[string]any{"seconds": 1}, nil),
		http.StatusForbidden, "wrong_credential_kind")

}

// api.md, Admin error codes: an evidence read of a task that does not
// exist is 404 task_not_found; an unknown evidence of a known task is a 404
// too.
func TestAdminEvidenceOfUnknownTask(t *testing.T) {
	n := nodetest.Start(t)
	nodetest.MustError(t, n.Do("GET", nodetest.AdminPath+"/tasks/"+nodetest.NewID()+"/evidence/"+nodetest.NewID(), n.AdminToken, nil, nil),
		http.StatusNotFound, "task_not_found")

	nodetest.MustError(t, n.Do("GET", nodetest.AdminPath+"/tasks/not-a-uuid/evidence/x", n.AdminToken, nil, nil),
		http.StatusNotFound, "task_not_found")

	id := n.CreateTask(nil)
	r := n.Do("GET", nodetest.AdminPath+"/tasks/"+id+"/evidence/"+nodetest.NewID(), n.AdminToken, nil, nil)
	if r.Status != http.StatusNotFound {
		t.Fatalf("unknown evidence of a known task: %d %s", r.Status, r.Body)
	}
}

// operations.md, The data directory: taskledger.db, blobs/, snapshots/ and
// the initial admin token (0600) after the first start.
func TestDataDirectoryLayout(t *testing.T) {
	n := nodetest.Start(t)
	for _, name := range []string{"blobs", "snapshots"} {
		if st, err := os.Stat(filepath.Join(n.Dir, name)); err != nil || !st.IsDir() {
			t.Errorf("%s/ missing after the first start: %v", name, err)
		}
	}
	if st, err := os.Stat(filepath.Join(n.Dir, "taskledger.db")); err != nil || st.IsDir() {
		t.Errorf("taskledger.db: %v", err)
	}
	st, err := os.Stat(filepath.Join(n.Dir, "initial-admin-token"))
	if err != nil || st.Mode().Perm() != 0o600 {
		t.Fatalf("initial-admin-token: %v (mode %v)", err, st.Mode().Perm())
	}
	n.CreateTask(nil)
	p, err := n.Snapshot()
	if err != nil || filepath.Dir(p) != filepath.Join(n.Dir, "snapshots") ||
		!regexp.MustCompile(`^snapshot-[0-9]+\.tlsnap$`).MatchString(filepath.Base(p)) {
		t.Fatalf("snapshot written to %s: %v", p, err)
	}
}

var wireTimeRE = regexp.MustCompile(`^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}\.\d{3}Z$`)

// mustWireTimes checks every time field of a JSON document (…_at,
// server_time, client_time): exactly three fractional digits and Z.
func mustWireTimes(t *testing.T, where string, v any) {
	t.Helper()
	switch x := v.(type) {
	case map[string]any:
		for k, e := range x {
			if s, ok := e.(string); ok && (strings.HasSuffix(k, "_at") || k == "server_time" || k == "client_time") {
				if !wireTimeRE.MatchString(s) {
					t.Errorf("%s: %s = %q is not RFC 3339 with three fractional digits and Z", where, k, s)
				}
			}
			mustWireTimes(t, where, e)
		}
	case []any:
		for _, e := range x {
			mustWireTimes(t, where, e)
		}
	}
}

// api.md: times are written with exactly three fractional digits and Z —
// in every answer, also when the millisecond part is zero; every device
// task response carries state, version, claim_generation, server_time and
// lease_expires_at.
func TestTimesAndDeviceTaskFields(t *testing.T) {
	n := nodetest.Start(t)
	d := n.ReadyDevice(t)
	id := n.CreateTask(nil)
	r, tok := d.Claim()
	nodetest.Must(t, r, http.StatusOK)
	mustWireTimes(t, "claim", r.JSON())
	claim := r.JSON()["claim"].(map[string]any)
	if _, has := claim["token"]; has {
		t.Fatalf("client-issued claim echoes a token: %s", r.Body)
	}
	if _, has := r.JSON()["task"].(map[string]any)["reference_image_url"]; has {
		t.Fatalf("reference_image_url without an image: %s", r.Body)
	}
	answers := map[string]*nodetest.Resp{"claim": r}
	answers["renew"] = d.Call(id, "lease/renew", tok, map[string]any{"claim_generation": 1, "session_id": d.Session,
		"expected_lease_expires_at": nodetest.Str(claim, "lease_expires_at")}, "")
	answers["start"] = d.Call(id, "start", tok, map[string]any{"claim_generation": 1, "expected_version": 2}, "")
	ex := nodetest.Str(answers["start"].JSON(), "execution_id")
	answers["heartbeat"] = d.Call(id, "heartbeat", tok, map[string]any{"claim_generation": 1, "execution_id": ex,
		"step": "step one", "client_time": "2026-01-02T03:04:05Z"}, "")
	answers["complete"] = d.Call(id, "complete", tok, map[string]any{"claim_generation": 1, "execution_id": ex,
		"expected_version": 3, "result": map[string]any{"ok": true}}, "")
	for name, a := range answers {
		nodetest.Must(t, a, http.StatusOK)
		m := a.JSON()
		for _, f := range []string{"state", "version", "claim_generation", "server_time", "lease_expires_at"} {
			if _, ok := m[f]; !ok {
				t.Errorf("%s answer lacks %s: %s", name, f, a.Body)
			}
		}
		mustWireTimes(t, name, m)
	}
	if s := nodetest.Str(answers["heartbeat"].JSON(), "step"); s != "step one" {
		t.Errorf("heartbeat answer step %q", s)
	}
	p := n.Do("POST", nodetest.Presence, d.Token, map[string]any{"device_id": d.ID, "app_version": "1", "os_version": "x",
		"target_app_version": "7", "checks": map[string]bool{"accessibility_connected": true}, "active_task_id": nil,
		"client_time": nil}, nil)
	nodetest.Must(t, p, http.StatusOK)
	mustWireTimes(t, "presence", p.JSON())
	mustWireTimes(t, "task detail", n.Task(id))
	ev := n.Do("GET", nodetest.AdminPath+"/tasks/"+id+"/events", n.AdminToken, nil, nil)
	nodetest.Must(t, ev, http.StatusOK)
	mustWireTimes(t, "task events", ev.JSON())
	dev := n.Do("GET", nodetest.AdminPath+"/devices/"+d.ID, n.AdminToken, nil, nil)
	nodetest.Must(t, dev, http.StatusOK)
	mustWireTimes(t, "device", dev.JSON())
}

// api.md, presence heartbeat: versions 1–64 printable ASCII, checks 1–16
// names [a-z0-9_]{1,32} to booleans, active_task_id and client_time absent
// or null; no Idempotency-Key (a malformed one is ignored).
func TestPresenceValidation(t *testing.T) {
	n := nodetest.Start(t)
	d := n.RegisterDevice()
	base := func() map[string]any {
		return map[string]any{"device_id": d.ID, "app_version": "1.4.2", "os_version": "Android 14",
			"target_app_version": "7.1.0", "checks": map[string]any{"accessibility_connected": true}}
	}
	ok := base()
	r := n.Do("POST", nodetest.Presence, d.Token, ok, map[string]string{"Idempotency-Key": "whatever"})
	nodetest.Must(t, r, http.StatusOK)
	var keys []string
	for k := range r.JSON() {
		keys = append(keys, k)
	}
	if len(keys) != 6 {
		t.Fatalf("presence answer fields %v", keys)
	}
	sixteen := map[string]any{}
	for _, c := range "abcdefghijklmnop" {
		sixteen[string(c)] = false
	}
	long := strings.Repeat("a", 32)
	nodetest.Must(t, n.Do("POST", nodetest.Presence, d.Token, with(base(), "checks", sixteen), nil), http.StatusOK)
	nodetest.Must(t, n.Do("POST", nodetest.Presence, d.Token, with(base(), "checks", map[string]any{long: true}), nil), http.StatusOK)
	nodetest.Must(t, n.Do("POST", nodetest.Presence, d.Token, with(base(), "app_version", strings.Repeat("x", 64)), nil), http.StatusOK)
	seventeen := map[string]any{"q": true}
	for k, v := range sixteen {
		seventeen[k] = v
	}
	bad := []map[string]any{
		with(base(), "app_version", ""),
		with(base(), "app_version", strings.Repeat("x", 65)),
		with(base(), "os_version", "Android\u00a014"),
		with(base(), "target_app_version", "7\n"),
		with(base(), "checks", map[string]any{}),
		with(base(), "checks", seventeen),
		with(base(), "checks", map[string]any{"Upper": true}),
		with(base(), "checks", map[string]any{long + "a": true}),
		with(base(), "checks", map[string]any{"x": "true"}),
		with(base(), "active_task_id", "not-a-uuid"),
		with(base(), "client_time", "yesterday"),
		with(base(), "extra", 1),
		without(base(), "target_app_version"),
		without(base(), "checks"),
		without(base(), "device_id"),
	}
	for i, b := range bad {
		r := n.Do("POST", nodetest.Presence, d.Token, b, nil)
		if r.Status != http.StatusBadRequest || r.Code() != "invalid_request" {
			raw, _ := json.Marshal(b)
			t.Errorf("bad presence %d %s: %d %s", i, raw, r.Status, r.Body)
		}
	}
}

func with(m map[string]any, k string, v any) map[string]any { m[k] = v; return m }
func without(m map[string]any, k string) map[string]any     { delete(m, k); return m }

// api.md, POST /admin/devices: required_checks 0–16 names; present, even
// empty, it replaces the server default; a replay answers without token.
func TestRegistrationRequiredChecks(t *testing.T) {
	n := nodetest.Start(t)
	key := nodetest.NewKey()
	body := map[string]any{"owner_id": nodetest.NewID(), "name": "phone", "required_checks": []string{}}
	r := n.Do("POST", nodetest.AdminPath+"/devices", n.AdminToken, body, map[string]string{"Idempotency-Key": key})
	nodetest.Must(t, r, http.StatusCreated)
	m := r.JSON()
	if rc, ok := m["required_checks"].([]any); !ok || len(rc) != 0 || nodetest.Str(m, "token") == "" {
		t.Fatalf("registration with an empty required_checks: %s", r.Body)
	}
	again := n.Do("POST", nodetest.AdminPath+"/devices", n.AdminToken, body, map[string]string{"Idempotency-Key": key})
	nodetest.Must(t, again, http.StatusCreated)
	if again.Header.Get("Idempotent-Replayed") != "true" || nodetest.Str(again.JSON(), "device_id") != nodetest.Str(m, "device_id") {
		t.Fatalf("registration replay: %v %s", again.Header, again.Body)
	}
	if _, has := again.JSON()["token"]; has {
		t.Fatalf("a registration replay shows the token again: %s", again.Body)
	}
	// The device with no required checks is claimable with any check.
	d := &nodetest.Device{N: n, ID: nodetest.Str(m, "device_id"), Token: nodetest.Str(m, "token"), Session: nodetest.NewID()}
	p := n.Do("POST", nodetest.Presence, d.Token, map[string]any{"device_id": d.ID, "app_version": "1", "os_version": "x",
		"target_app_version": "7", "checks": map[string]bool{"accessibility_connected": false}}, nil)
	nodetest.Must(t, p, http.StatusOK)
	if p.JSON()["claimable"] != true {
		t.Fatalf("device with required_checks [] not claimable: %s", p.Body)
	}
	dflt := n.RegisterDevice()
	if rc := n.Do("GET", nodetest.AdminPath+"/devices/"+dflt.ID, n.AdminToken, nil, nil).JSON()["required_checks"].([]any); len(rc) != 2 {
		t.Fatalf("default required checks %v", rc)
	}
	sixteen := []string{}
	for _, c := range "abcdefghijklmnop" {
		sixteen = append(sixteen, string(c))
	}
	nodetest.Must(t, n.Do("POST", nodetest.AdminPath+"/devices", n.AdminToken, map[string]any{"owner_id": nodetest.NewID(), "name": "p",
		"required_checks": sixteen}, nil), http.StatusCreated)
	nodetest.MustError(t, n.Do("POST", nodetest.AdminPath+"/devices", n.AdminToken, map[string]any{"owner_id": nodetest.NewID(), "name": "p",
		"required_checks": append(sixteen, "q")}, nil), http.StatusBadRequest, "invalid_request")

}

// api.md, GET /admin/tasks: newest first (descending creation seq), the
// state and device_id filters, limit ≤ 500 and paging by next_cursor.
func TestAdminTaskListing(t *testing.T) {
	n := nodetest.Start(t)
	var ids []string
	for i := 0; i < 5; i++ {
		ids = append(ids, n.CreateTask(map[string]any{"i": i}))
	}
	d := n.ReadyDevice(t)
	claimed, _, _ := d.MustClaim(t) // the oldest
	if claimed != ids[0] {
		t.Fatalf("claimed %s, want the oldest %s", claimed, ids[0])
	}
	list := func(q string) map[string]any {
		r := n.Do("GET", nodetest.AdminPath+"/tasks"+q, n.AdminToken, nil, nil)
		nodetest.Must(t, r, http.StatusOK)
		return r.JSON()
	}
	idsOf := func(m map[string]any) []string {
		var out []string
		for _, x := range m["tasks"].([]any) {
			out = append(out, x.(map[string]any)["id"].(string))
		}
		return out
	}
	var got []string
	page := list("?limit=2")
	for {
		got = append(got, idsOf(page)...)
		cur, ok := page["next_cursor"].(string)
		if !ok {
			if page["next_cursor"] != nil {
				t.Fatalf("next_cursor %v", page["next_cursor"])
			}
			break
		}
		page = list("?limit=2&cursor=" + cur)
	}
	want := []string{ids[4], ids[3], ids[2], ids[1], ids[0]}
	if strings.Join(got, ",") != strings.Join(want, ",") {
		t.Fatalf("paged listing %v, want newest first %v", got, want)
	}
	if g := idsOf(list("?state=CLAIMED")); len(g) != 1 || g[0] != ids[0] {
		t.Fatalf("state=CLAIMED: %v", g)
	}
	if g := idsOf(list("?device_id=" + d.ID)); len(g) != 1 || g[0] != ids[0] {
		t.Fatalf("device_id filter: %v", g)
	}
	if g := idsOf(list("?limit=500")); len(g) != 5 {
		t.Fatalf("limit=500: %v", g)
	}
	for _, q := range []string{"?limit=501", "?limit=0", "?state=DONE", "?device_id=x"} {
		nodetest.MustError(t, n.Do("GET", nodetest.AdminPath+"/tasks"+q, n.AdminToken, nil, nil), http.StatusBadRequest, "invalid_request")
	}
}

// api.md, Errors: 503 has an empty body and Retry-After; once shutting
// down, the API answers so.
func TestUnavailableEmptyBody(t *testing.T) {
	n := nodetest.Start(t)
	n.API.Stopping()
	res, err := http.Get(n.URL + nodetest.AdminPath + "/tasks")
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(res.Body)
	res.Body.Close()
	if res.StatusCode != http.StatusServiceUnavailable || len(body) != 0 || res.Header.Get("Retry-After") == "" {
		t.Fatalf("shutting down: %d %q Retry-After %q", res.StatusCode, body, res.Header.Get("Retry-After"))
	}
}
