package api_test

// Helpers of the issue-3 tests (authorization snapshots, renew,
// server-issued claim tokens, device revocation). Prefixed i3 to stay
// apart from the other test files of this package.

import (
	"bytes"
	"crypto/rand"
	"encoding/json"
	"io"
	"net/http"
	"testing"
	"time"

	"taskledger/commands"
	"taskledger/node/nodetest"
)

// i3Secret returns a new 32-byte claim-token secret.
func i3Secret(t *testing.T) []byte {
	t.Helper()
	b := make([]byte, 32)
	if _, err := rand.Read(b); err != nil {
		t.Fatal(err)
	}
	return b
}

// i3WithSecret configures a node with a claim-token secret.
func i3WithSecret(secret []byte) nodetest.Option {
	return nodetest.WithConfig(func(c *commands.Config) { c.ClaimSecret = secret })
}

// i3Admin sends an admin request.
func i3Admin(n *nodetest.Node, method, path string, body any) *nodetest.Resp {
	n.T.Helper()
	return n.Do(method, "/api/v1/admin"+path, n.AdminToken, body, nil)
}

// i3CreateTask creates a task authorized for ttl (0: not authorized) and
// returns its detail document.
func i3CreateTask(t *testing.T, n *nodetest.Node, payload map[string]any, ttl time.Duration) map[string]any {
	t.Helper()
	body := map[string]any{"payload": payload}
	if ttl > 0 {
		body["authorize"] = map[string]any{"ttl_seconds": int64(ttl / time.Second)}
	}
	r := i3Admin(n, "POST", "/tasks", body)
	nodetest.Must(t, r, 201)
	return r.JSON()
}

// i3Authorize authorizes a task's revision for ttl.
func i3Authorize(n *nodetest.Node, id string, revision uint64, ttl time.Duration) *nodetest.Resp {
	n.T.Helper()
	return i3Admin(n, "POST", "/tasks/"+id+"/authorize", map[string]any{"expected_revision": revision,
		"ttl_seconds": int64(ttl / time.Second)})
}

// i3ReadyDevice registers a device and sends a ready presence heartbeat.
func i3ReadyDevice(t *testing.T, n *nodetest.Node) *nodetest.Device {
	t.Helper()
	d := n.RegisterDevice()
	nodetest.Must(t, d.Ready(), 200)
	return d
}

// i3Claim claims with a new client-issued token; it returns the claimed
// task id, the token and the answer.
func i3Claim(t *testing.T, d *nodetest.Device) (string, string, map[string]any) {
	t.Helper()
	r, tok := d.Claim()
	nodetest.Must(t, r, 200)
	m := r.JSON()
	return nodetest.Str(m["task"].(map[string]any), "id"), tok, m
}

// i3Ms parses an RFC 3339 time of an answer into Unix ms.
func i3Ms(t *testing.T, v any) int64 {
	t.Helper()
	s, _ := v.(string)
	tm, err := time.Parse(time.RFC3339Nano, s)
	if err != nil {
		t.Fatalf("time %q: %v", s, err)
	}
	return tm.UnixMilli()
}

// i3Fmt formats Unix ms as the API writes times.
func i3Fmt(ms int64) string { return time.UnixMilli(ms).UTC().Format("2006-01-02T15:04:05.000Z") }

// i3Obj reads a JSON object field.
func i3Obj(m map[string]any, k string) map[string]any { o, _ := m[k].(map[string]any); return o }

// i3Events returns a task's history.
func i3Events(t *testing.T, n *nodetest.Node, id string) []map[string]any {
	t.Helper()
	r := i3Admin(n, "GET", "/tasks/"+id+"/events", nil)
	nodetest.Must(t, r, 200)
	var doc struct {
		Events []map[string]any `json:"events"`
	}
	if err := json.Unmarshal(r.Body, &doc); err != nil {
		t.Fatal(err)
	}
	return doc.Events
}

// i3Renew sends a renew with an expected lease expiry.
func i3Renew(d *nodetest.Device, id, tok string, gen uint64, session string, expected int64, key string) *nodetest.Resp {
	return d.Call(id, "lease/renew", tok, map[string]any{"claim_generation": gen, "session_id": session,
		"expected_lease_expires_at": i3Fmt(expected)}, key)
}

// i3Start starts a claimed task (expected_version 2 after its first claim
// unless given).
func i3Start(d *nodetest.Device, id, tok string, gen, version uint64) *nodetest.Resp {
	return d.Call(id, "start", tok, map[string]any{"claim_generation": gen, "expected_version": version}, "")
}

// i3Answer is one HTTP answer from a goroutine.
type i3Answer struct {
	status int
	header http.Header
	body   []byte
	err    error
}

func (a *i3Answer) json() map[string]any {
	var m map[string]any
	_ = json.Unmarshal(a.body, &m)
	return m
}

func (a *i3Answer) code() string { c, _ := a.json()["code"].(string); return c }

// i3Post sends a POST without touching testing.T (safe in goroutines).
func i3Post(n *nodetest.Node, path, token string, body any, headers map[string]string) *i3Answer {
	raw, _ := json.Marshal(body)
	req, err := http.NewRequest("POST", n.URL+path, bytes.NewReader(raw))
	if err != nil {
		return &i3Answer{err: err}
	}
	req.Header.Set("Authorization", "Bearer "+token)
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Idempotency-Key", nodetest.NewKey())
	for k, v := range headers {
		req.Header.Set(k, v)
	}
	res, err := n.HTTP.Do(req)
	if err != nil {
		return &i3Answer{err: err}
	}
	defer res.Body.Close()
	b, err := io.ReadAll(res.Body)
	return &i3Answer{status: res.StatusCode, header: res.Header, body: b, err: err}
}
