package nodetest

import (
	"bytes"
	"crypto/rand"
	"encoding/json"
	"io"
	"net/http"
	"testing"
	"time"

	"github.com/google/uuid"

	"taskledger/commands"
)

// Route prefixes of the API.
const (
	DevicePath = "/api/v1/device"
	AdminPath  = "/api/v1/admin"
	ClaimNext  = DevicePath + "/tasks/claim-next"
	Presence   = DevicePath + "/heartbeat"
)

// TimeLayout is how the API writes times (RFC 3339 UTC, milliseconds).
const TimeLayout = "2006-01-02T15:04:05.000Z"

// NewID returns a random canonical UUIDv4.
func NewID() string { return uuid.NewString() }

// NewClaimSecret returns a new 32-byte claim-token secret.
func NewClaimSecret(t testing.TB) []byte {
	t.Helper()
	b := make([]byte, 32)
	if _, err := rand.Read(b); err != nil {
		t.Fatal(err)
	}
	return b
}

// WithClaimSecret configures a node with a claim-token secret (the server
// issues claim tokens).
func WithClaimSecret(secret []byte) Option {
	return WithConfig(func(c *commands.Config) { c.ClaimSecret = secret })
}

// Millis parses a time of an answer into Unix ms.
func Millis(t testing.TB, v any) int64 {
	t.Helper()
	s, _ := v.(string)
	tm, err := time.Parse(time.RFC3339Nano, s)
	if err != nil {
		t.Fatalf("time %q: %v", s, err)
	}
	return tm.UnixMilli()
}

// FormatMillis formats Unix ms as the API writes times.
func FormatMillis(ms int64) string { return time.UnixMilli(ms).UTC().Format(TimeLayout) }

// Obj reads a JSON object field.
func Obj(m map[string]any, k string) map[string]any { o, _ := m[k].(map[string]any); return o }

// JSONHeaders are the headers of a JSON mutation with a new key, plus extra.
func JSONHeaders(extra map[string]string) map[string]string {
	h := map[string]string{"Content-Type": "application/json", "Idempotency-Key": NewKey()}
	for k, v := range extra {
		h[k] = v
	}
	return h
}

// Raw sends a request with full control of the body: body is sent as is,
// or chunked (unknown length) when chunked is set. headers are set as
// given (no automatic Content-Type or Idempotency-Key).
func (n *Node) Raw(t testing.TB, method, path, token string, body []byte, chunked bool, headers map[string]string) *Resp {
	t.Helper()
	var rd io.Reader
	if body != nil {
		rd = bytes.NewReader(body)
		if chunked {
			rd = io.MultiReader(bytes.NewReader(body)) // hides the length
		}
	}
	req, err := http.NewRequest(method, n.URL+path, rd)
	if err != nil {
		t.Fatalf("request: %v", err)
	}
	if chunked {
		req.ContentLength = -1
	}
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	for k, v := range headers {
		req.Header.Set(k, v)
	}
	res, err := n.HTTP.Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v", method, path, err)
	}
	defer res.Body.Close()
	raw, _ := io.ReadAll(res.Body)
	return &Resp{Status: res.StatusCode, Header: res.Header, Body: raw}
}

// Admin sends an admin request (path after /api/v1/admin).
func (n *Node) Admin(method, path string, body any) *Resp {
	n.T.Helper()
	return n.Do(method, AdminPath+path, n.AdminToken, body, nil)
}

// CreateTaskFor creates a task authorized for ttl (0: not authorized) and
// returns its answer document.
func (n *Node) CreateTaskFor(t testing.TB, payload map[string]any, ttl time.Duration) map[string]any {
	t.Helper()
	body := map[string]any{"payload": payload}
	if ttl > 0 {
		body["authorize"] = map[string]any{"ttl_seconds": int64(ttl / time.Second)}
	}
	r := n.Admin("POST", "/tasks", body)
	Must(t, r, 201)
	return r.JSON()
}

// Authorize authorizes a task's revision for ttl.
func (n *Node) Authorize(id string, revision uint64, ttl time.Duration) *Resp {
	n.T.Helper()
	return n.Admin("POST", "/tasks/"+id+"/authorize", map[string]any{"expected_revision": revision,
		"ttl_seconds": int64(ttl / time.Second)})
}

// Cancel sends an operator cancel.
func (n *Node) Cancel(id string) *Resp {
	return n.Do("POST", AdminPath+"/tasks/"+id+"/cancel", n.AdminToken, map[string]any{"reason": "operator says stop"}, nil)
}

// Revoke revokes a device.
func (n *Node) Revoke(id string) *Resp {
	n.T.Helper()
	return n.Admin("POST", "/devices/"+id+"/revoke", map[string]any{"reason": "lost phone"})
}

// State returns a task's state and version from its detail document.
func (n *Node) State(id string) (string, uint64) {
	m := n.Task(id)
	return Str(m, "state"), Num(m, "version")
}

// Events returns a task's history.
func (n *Node) Events(t testing.TB, id string) []map[string]any {
	t.Helper()
	r := n.Admin("GET", "/tasks/"+id+"/events", nil)
	Must(t, r, 200)
	var doc struct {
		Events []map[string]any `json:"events"`
	}
	if err := json.Unmarshal(r.Body, &doc); err != nil {
		t.Fatal(err)
	}
	return doc.Events
}

// EventTypes returns the types of a task's events, in order.
func (n *Node) EventTypes(t testing.TB, id string) []string {
	t.Helper()
	var out []string
	for _, e := range n.Events(t, id) {
		out = append(out, Str(e, "type"))
	}
	return out
}

// ReadyDevice registers a device and sends a ready presence heartbeat.
func (n *Node) ReadyDevice(t testing.TB) *Device {
	t.Helper()
	d := n.RegisterDevice()
	Must(t, d.Ready(), http.StatusOK)
	return d
}

// ClaimedTask returns the task id of a claim answer.
func ClaimedTask(r *Resp) string { return Str(Obj(r.JSON(), "task"), "id") }

// MustClaim claims with a new key and client-issued token; it returns the
// claimed task id, the token and the answer.
func (d *Device) MustClaim(t testing.TB) (string, string, *Resp) {
	t.Helper()
	r, tok := d.Claim()
	Must(t, r, http.StatusOK)
	return ClaimedTask(r), tok, r
}

// Start starts a claimed task (version 2 after its first claim).
func (d *Device) Start(id, tok string, gen, version uint64) *Resp {
	return d.Call(id, "start", tok, map[string]any{"claim_generation": gen, "expected_version": version}, "")
}

// MustStart starts a claimed task and returns its execution id.
func (d *Device) MustStart(t testing.TB, id, tok string, gen, version uint64) string {
	t.Helper()
	r := d.Start(id, tok, gen, version)
	Must(t, r, http.StatusOK)
	ex := Str(r.JSON(), "execution_id")
	if ex == "" {
		t.Fatalf("start without execution_id: %s", r.Body)
	}
	return ex
}

// Renew sends a lease renew with an expected lease expiry (Unix ms).
func (d *Device) Renew(id, tok string, gen uint64, session string, expected int64, key string) *Resp {
	return d.Call(id, "lease/renew", tok, map[string]any{"claim_generation": gen, "session_id": session,
		"expected_lease_expires_at": FormatMillis(expected)}, key)
}

// AdvanceTo moves the manual clock to exactly at (Unix ms, a whole number
// of seconds from now).
func (n *Node) AdvanceTo(t testing.TB, at int64) {
	t.Helper()
	d := at - n.Engine.Now()
	if d <= 0 || d%1000 != 0 {
		t.Fatalf("cannot advance by %d ms", d)
	}
	n.Advance(time.Duration(d) * time.Millisecond)
	if n.Engine.Now() != at {
		t.Fatalf("clock at %s, want %s", FormatMillis(n.Engine.Now()), FormatMillis(at))
	}
}
