package api_test

import (
	"bytes"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/uuid"
	"github.com/rs/zerolog"

	"taskledger/commands"
	"taskledger/node"
	"taskledger/projections"
)

// fuzzRoute is one JSON route whose request decoder FuzzRouteBodies drives.
type fuzzRoute struct {
	path  string
	admin bool
	seed  string // a valid body (ids filled in by the fuzz set-up)
}

// FuzzRouteBodies sends any body and any Idempotency-Key, X-Claim-Token and
// X-Claim-Generation to every JSON route of an in-process node (device and
// admin). Whatever comes in, the answer is never a 5xx, every refusal is
// a JSON {code, message}, and a refusal (4xx) appends nothing to the log.
func FuzzRouteBodies(f *testing.F) {
	dir := f.TempDir()
	n, err := node.Open(node.Config{DataDir: dir, Manual: true, Commands: commands.DefaultConfig(),
		SnapshotEvery: 100000, Logger: zerolog.Nop()})
	if err != nil {
		f.Fatal(err)
	}
	f.Cleanup(func() { _ = n.Close() })
	tok, _ := os.ReadFile(filepath.Join(dir, node.InitialTokenFile))
	admin := strings.TrimSpace(string(tok))
	h := n.API.Handler()
	send := func(path, token string, body []byte, hdr map[string]string) *httptest.ResponseRecorder {
		req := httptest.NewRequest("POST", path, bytes.NewReader(body))
		req.Header.Set("Authorization", "Bearer "+token)
		req.Header.Set("Content-Type", "application/json")
		for k, v := range hdr {
			req.Header.Set(k, v)
		}
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, req)
		return rec
	}
	reg := send("/api/v1/admin/devices", admin, []byte(`{"owner_id":"`+uuid.NewString()+`","name":"fuzz"}`),
		map[string]string{"Idempotency-Key": uuid.NewString()})
	var dev map[string]any
	if reg.Code != 201 || json.Unmarshal(reg.Body.Bytes(), &dev) != nil {
		f.Fatalf("register: %d %s", reg.Code, reg.Body)
	}
	cr := send("/api/v1/admin/tasks", admin, []byte(`{"payload":{"n":1}}`), map[string]string{"Idempotency-Key": uuid.NewString()})
	var task map[string]any
	if cr.Code != 201 || json.Unmarshal(cr.Body.Bytes(), &task) != nil {
		f.Fatalf("create: %d %s", cr.Code, cr.Body)
	}
	devID, devTok, taskID := dev["device_id"].(string), dev["token"].(string), task["id"].(string)
	// The revoke route gets a device of its own: the fuzzed device stays active.
	other := send("/api/v1/admin/devices", admin, []byte(`{"owner_id":"`+uuid.NewString()+`","name":"fuzz-revoked"}`),
		map[string]string{"Idempotency-Key": uuid.NewString()})
	var otherDev map[string]any
	if other.Code != 201 || json.Unmarshal(other.Body.Bytes(), &otherDev) != nil {
		f.Fatalf("register: %d %s", other.Code, other.Body)
	}
	exec, sess := uuid.NewString(), uuid.NewString()
	base := `"device_id":"` + devID + `","claim_generation":1`
	routes := []fuzzRoute{
		{path: "/api/v1/device/heartbeat", seed: `{"device_id":"` + devID + `","app_version":"1.0","os_version":"x","target_app_version":"1","checks":{"a":true},"active_task_id":null,"client_time":"2026-11-30T08:15:00.123Z"}`},
		{path: "/api/v1/device/tasks/claim-next", seed: `{"device_id":"` + devID + `","session_id":"` + sess + `"}`},
		{path: "/lease/renew", seed: `{` + base + `,"session_id":"` + sess + `","expected_lease_expires_at":"2026-11-30T08:15:00.123Z"}`},
		{path: "/release", seed: `{` + base + `,"expected_version":2}`},
		{path: "/start", seed: `{` + base + `,"expected_version":2}`},
		{path: "/heartbeat", seed: `{` + base + `,"execution_id":"` + exec + `","step":"s"}`},
		{path: "/await-confirmation", seed: `{` + base + `,"execution_id":"` + exec + `","expected_version":3,"reason":"r"}`},
		{path: "/resume", seed: `{` + base + `,"execution_id":"` + exec + `","expected_version":4}`},
		{path: "/complete", seed: `{` + base + `,"execution_id":"` + exec + `","expected_version":3,"result":{"ok":true}}`},
		{path: "/fail", seed: `{` + base + `,"execution_id":"` + exec + `","expected_version":3,"reason_code":"x","detail":"d"}`},
		{path: "/cancel-ack", seed: `{` + base + `,"execution_id":"` + exec + `","expected_version":3}`},
		{path: "/api/v1/admin/devices", admin: true, seed: `{"owner_id":"` + uuid.NewString() + `","name":"n","required_checks":["a"]}`},
		{path: "/api/v1/admin/devices/" + otherDev["device_id"].(string) + "/revoke", admin: true, seed: `{"reason":"r"}`},
		{path: "/api/v1/admin/tasks", admin: true, seed: `{"payload":{"a":[1,"x",null]},"authorize":{"ttl_seconds":3600}}`},
		{path: "/api/v1/admin/tasks/" + taskID + "/amend", admin: true, seed: `{"expected_revision":1,"payload":{}}`},
		{path: "/api/v1/admin/tasks/" + taskID + "/authorize", admin: true, seed: `{"expected_revision":1,"ttl_seconds":3600,"takeover":"manual"}`},
		{path: "/api/v1/admin/tasks/" + taskID + "/authorization/revoke", admin: true, seed: `{"reason":"r"}`},
		{path: "/api/v1/admin/tasks/" + taskID + "/cancel", admin: true, seed: `{"reason":"r","expected_version":1}`},
		{path: "/api/v1/admin/tasks/" + taskID + "/recover", admin: true, seed: `{"decision":"fail","reason":"r","expected_version":2}`},
		{path: "/api/v1/admin/test-clock/advance", admin: true, seed: `{"seconds":1}`},
	}
	for i := range routes {
		if strings.HasPrefix(routes[i].path, "/") && !strings.HasPrefix(routes[i].path, "/api/") {
			routes[i].path = "/api/v1/device/tasks/" + taskID + routes[i].path
		}
	}
	key, claim := uuid.NewString(), strings.Repeat("A", 43)
	for i, r := range routes {
		f.Add(uint8(i), []byte(r.seed), key, claim, "1")
		f.Add(uint8(i), []byte(r.seed[:len(r.seed)/2]), key, claim, "1")
		f.Add(uint8(i), []byte(strings.Replace(r.seed, `":`, `":[`, 1)), "not-a-key", "x", "0")
	}
	f.Add(uint8(0), []byte(`{"device_id":"a","device_id":"b"}`), "", "", "")
	f.Add(uint8(13), []byte(`{"payload":{"a":"\ud800"}}`), key, "", "")
	head := func() uint64 {
		var seq uint64
		n.Engine.Read(func(s *projections.State) { seq = s.Head.Seq })
		return seq
	}
	f.Fuzz(func(t *testing.T, route uint8, body []byte, idem, claimTok, gen string) {
		r := routes[int(route)%len(routes)]
		token := devTok
		if r.admin {
			token = admin
		}
		hdr := map[string]string{}
		for k, v := range map[string]string{"Idempotency-Key": idem, "X-Claim-Token": claimTok, "X-Claim-Generation": gen} {
			if v != "" && !strings.ContainsAny(v, "\r\n\x00") {
				hdr[k] = v
			}
		}
		before := head()
		rec := send(r.path, token, body, hdr)
		if rec.Code >= 500 {
			t.Fatalf("%s %q: %d %s", r.path, body, rec.Code, rec.Body)
		}
		if rec.Code < 400 {
			return
		}
		var e map[string]any
		if json.Unmarshal(rec.Body.Bytes(), &e) != nil || e["code"] == "" || e["code"] == nil || e["message"] == nil {
			t.Fatalf("%s %q: %d without a {code, message} body: %q", r.path, body, rec.Code, rec.Body)
		}
		// Only the recorded refusals (domain rule 2) may append.
		recorded := rec.Code == http.StatusConflict && (e["code"] == "claim_requires_manual" || e["code"] == "lease_expired")
		if after := head(); after != before && !recorded {
			t.Fatalf("%s %q: refused with %d %s but the log moved from seq %d to %d", r.path, body, rec.Code, rec.Body, before, after)
		}
	})
}
