// Package nodetest starts real taskledger nodes for tests: a ledger on
// t.TempDir(), the manual test clock, an httptest server, and a cleanup
// that proves the log verifies and that its replay equals the live
// projections (STYLE.md §12).
package nodetest

import (
	"bytes"
	"crypto/rand"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/rs/zerolog"

	"taskledger/commands"
	"taskledger/ledger"
	"taskledger/node"
	"taskledger/node/nodetest/proc"
	"taskledger/projections"
)

// Node is a running test node.
type Node struct {
	*node.Node
	T          testing.TB
	Dir        string
	URL        string
	AdminToken string
	HTTP       *http.Client
	server     *httptest.Server
	closed     bool
}

// Option changes a test node's configuration.
type Option func(*node.Config)

// WithConfig edits the commands configuration.
func WithConfig(f func(*commands.Config)) Option { return func(c *node.Config) { f(&c.Commands) } }

// WithDir uses dir as the data directory (to reopen a ledger).
func WithDir(dir string) Option { return func(c *node.Config) { c.DataDir = dir } }

// WithWallClock serves with the wall clock instead of the manual one.
func WithWallClock() Option { return func(c *node.Config) { c.Manual = false } }

// WithClock serves with clock (not the manual test clock): a SteadyClock
// on a time source the test steps, say.
func WithClock(clock commands.Clock) Option {
	return func(c *node.Config) { c.Manual, c.Clock = false, clock }
}

// Start starts a node with the manual clock and registers its cleanup.
func Start(t testing.TB, opts ...Option) *Node {
	t.Helper()
	cfg := node.Config{DataDir: t.TempDir(), Manual: true, Commands: commands.DefaultConfig(), SnapshotEvery: 100000,
		Logger: zerolog.Nop()}
	for _, o := range opts {
		o(&cfg)
	}
	n, err := node.Open(cfg)
	if err != nil {
		t.Fatalf("nodetest: open node: %v", err)
	}
	tok, _ := os.ReadFile(filepath.Join(cfg.DataDir, node.InitialTokenFile))
	srv := httptest.NewServer(validating(n.API.Handler(), t.Errorf))
	tn := &Node{Node: n, T: t, Dir: cfg.DataDir, URL: srv.URL, AdminToken: strings.TrimSpace(string(tok)),
		HTTP: srv.Client(), server: srv}
	t.Cleanup(func() { tn.Close() })
	return tn
}

// Close stops the node, then verifies its log and checks that a replay
// from the log equals the live projections (not after a failed commit
// fenced the engine: its projections are not the log's then). Safe to
// call twice.
func (n *Node) Close() {
	if n.closed {
		return
	}
	n.closed = true
	n.server.Close()
	var live []byte
	var cfg projections.Config
	fenced := n.Engine.Err() != nil // the projections may hold a failed batch: only the log is checked
	n.Engine.Read(func(s *projections.State) {
		if fenced {
			cfg = s.Config()
			return
		}
		live, _ = s.CanonicalWithSoft()
		cfg = s.Config()
		if err := s.CheckStateCounts(); err != nil {
			n.T.Errorf("nodetest: live %v", err)
		}
		if raw, err := s.Canonical(); err == nil {
			if r, err := projections.Restore(raw, cfg); err != nil {
				n.T.Errorf("nodetest: restore: %v", err)
			} else if err := r.CheckStateCounts(); err != nil {
				n.T.Errorf("nodetest: restored %v", err)
			}
		}
	})
	if err := n.Node.Close(); err != nil {
		n.T.Errorf("nodetest: close: %v", err)
		return
	}
	if n.Store == nil {
		return // a cluster node: the test verifies the stream
	}
	CheckLedger(n.T, n.Dir, cfg, live)
}

// CheckLedger verifies the ledger in dir (the read model of finished tasks
// on disk equal to the replay's, when it is at the log's head) and, when
// live is given, that the projections rebuilt from the log equal it and
// that the read model was at the head and compared.
func CheckLedger(t testing.TB, dir string, cfg projections.Config, live []byte) {
	t.Helper()
	store, err := ledger.Open(dir, ledger.Options{ReadOnly: true})
	if err != nil {
		t.Errorf("nodetest: reopen for verify: %v", err)
		return
	}
	defer store.Close()
	rep, err := node.Verify(store, cfg, nil)
	if err != nil {
		t.Errorf("nodetest: verify: %v", err)
		return
	}
	if live != nil {
		// Every commit of a node writes the read model of finished tasks
		// with its events: Verify compared it with the replay's, key by key.
		if !rep.ReadModelChecked {
			t.Errorf("nodetest: the read model of finished tasks is not at the log's head")
		}
		rebuilt, _ := rep.State.CanonicalWithSoft()
		if !bytes.Equal(rebuilt, live) {
			t.Errorf("nodetest: projections rebuilt from the log differ from the live ones")
		}
	}
}

// Restart closes the node (with its checks) and starts a new one on the
// same data directory.
func (n *Node) Restart(opts ...Option) *Node {
	n.Close()
	return Start(n.T, append([]Option{WithDir(n.Dir)}, opts...)...)
}

// Advance moves the manual clock forward through the HTTP route.
func (n *Node) Advance(d time.Duration) {
	n.T.Helper()
	r := n.Do("POST", "/api/v1/admin/test-clock/advance", n.AdminToken, map[string]any{"seconds": int64(d / time.Second)}, nil)
	if r.Status != 200 {
		n.T.Fatalf("nodetest: advance: %d %s", r.Status, r.Body)
	}
}

// Resp is an HTTP answer (Err: the transport error of Try); it is the
// process harness's type, so in-process and real-binary tests share it.
type Resp = proc.Resp

// Do sends a request with a bearer token; body may be nil, a []byte (sent
// as is) or any value (sent as JSON). headers are added as given (an empty
// value removes the header). A transport error fails the test.
func (n *Node) Do(method, path, token string, body any, headers map[string]string) *Resp {
	n.T.Helper()
	r := n.Try(method, path, token, body, headers)
	if r.Err != nil && r.Status == 0 {
		n.T.Fatalf("nodetest: %s %s: %v", method, path, r.Err)
	}
	return r
}

// Try is Do without touching testing.T, so it is safe in goroutines: a
// transport error is returned in Resp.Err.
func (n *Node) Try(method, path, token string, body any, headers map[string]string) *Resp {
	var rd io.Reader
	switch b := body.(type) {
	case nil:
	case []byte:
		rd = bytes.NewReader(b)
	default:
		raw, _ := json.Marshal(b)
		rd = bytes.NewReader(raw)
	}
	req, err := http.NewRequest(method, n.URL+path, rd)
	if err != nil {
		return &Resp{Err: err}
	}
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	if method == "POST" || method == "PUT" {
		if _, ok := headers["Idempotency-Key"]; !ok {
			req.Header.Set("Idempotency-Key", NewKey())
		}
	}
	for k, v := range headers {
		if v == "" {
			req.Header.Del(k)
		} else {
			req.Header.Set(k, v)
		}
	}
	res, err := n.HTTP.Do(req)
	if err != nil {
		return &Resp{Err: err}
	}
	defer res.Body.Close()
	raw, err := io.ReadAll(res.Body)
	return &Resp{Status: res.StatusCode, Header: res.Header, Body: raw, Err: err}
}

// NewKey returns a new idempotency key (canonical UUIDv4).
func NewKey() string { return uuid.NewString() }

// NewClaimToken returns a new client-issued claim token.
func NewClaimToken() string {
	var b [32]byte
	_, _ = rand.Read(b[:])
	return base64.RawURLEncoding.EncodeToString(b[:])
}

// Device is a registered test device.
type Device struct {
	N       *Node
	ID      string
	OwnerID string
	Token   string
	Session string
}

// RegisterDevice registers a device (with the server's default checks
// unless checks are given) and returns it.
func (n *Node) RegisterDevice(checks ...string) *Device {
	n.T.Helper()
	body := map[string]any{"owner_id": uuid.NewString(), "name": "test-device"}
	if checks != nil {
		body["required_checks"] = checks
	}
	r := n.Do("POST", "/api/v1/admin/devices", n.AdminToken, body, nil)
	if r.Status != 201 {
		n.T.Fatalf("nodetest: register device: %d %s", r.Status, r.Body)
	}
	m := r.JSON()
	return &Device{N: n, ID: m["device_id"].(string), OwnerID: m["owner_id"].(string), Token: m["token"].(string),
		Session: uuid.NewString()}
}

// Ready sends a presence heartbeat reporting every default check true.
func (d *Device) Ready() *Resp {
	d.N.T.Helper()
	return d.N.Do("POST", "/api/v1/device/heartbeat", d.Token, map[string]any{
		"device_id": d.ID, "app_version": "1.0.0", "os_version": "Android 14", "target_app_version": "7.1.0",
		"checks": map[string]bool{"accessibility_connected": true, "target_app_installed": true, "agent_running": true},
	}, nil)
}

// Claim sends claim-next with a new key and a new client-issued token;
// it returns the answer and the token used.
func (d *Device) Claim() (*Resp, string) {
	tok := NewClaimToken()
	return d.ClaimWith(NewKey(), tok), tok
}

// ClaimWith sends claim-next with the given key and token ("" = none).
func (d *Device) ClaimWith(key, token string) *Resp {
	h := map[string]string{"Idempotency-Key": key}
	if token != "" {
		h["X-Claim-Token"] = token
	}
	return d.N.Do("POST", "/api/v1/device/tasks/claim-next", d.Token,
		map[string]any{"device_id": d.ID, "session_id": d.Session}, h)
}

// Call sends a task-scoped call: op is the path after the task id.
func (d *Device) Call(taskID, op, token string, body map[string]any, key string) *Resp {
	if key == "" {
		key = NewKey()
	}
	if body == nil {
		body = map[string]any{}
	}
	body["device_id"] = d.ID
	return d.N.Do("POST", "/api/v1/device/tasks/"+taskID+"/"+op, d.Token, body,
		map[string]string{"Idempotency-Key": key, "X-Claim-Token": token})
}

// CreateTask creates an authorized task and returns its id.
func (n *Node) CreateTask(payload map[string]any) string {
	n.T.Helper()
	if payload == nil {
		payload = map[string]any{"n": 1}
	}
	r := n.Do("POST", "/api/v1/admin/tasks", n.AdminToken, map[string]any{"payload": payload,
		"authorize": map[string]any{"ttl_seconds": 3600}}, nil)
	if r.Status != 201 {
		n.T.Fatalf("nodetest: create task: %d %s", r.Status, r.Body)
	}
	return r.JSON()["id"].(string)
}

// Task returns a task's detail document.
func (n *Node) Task(id string) map[string]any {
	n.T.Helper()
	r := n.Do("GET", "/api/v1/admin/tasks/"+id, n.AdminToken, nil, nil)
	if r.Status != 200 {
		n.T.Fatalf("nodetest: task %s: %d %s", id, r.Status, r.Body)
	}
	return r.JSON()
}

// Head returns the committed head seq.
func (n *Node) Head() uint64 {
	var seq uint64
	n.Engine.Read(func(s *projections.State) { seq = s.Head.Seq })
	return seq
}

// Num reads a JSON number field as uint64.
func Num(m map[string]any, key string) uint64 {
	f, _ := m[key].(float64)
	return uint64(f)
}

// Str reads a JSON string field.
func Str(m map[string]any, key string) string {
	s, _ := m[key].(string)
	return s
}

// Must fails the test unless r has the status (and, if given, the code).
func Must(t testing.TB, r *Resp, status int, code ...string) {
	t.Helper()
	if r.Status != status || (len(code) > 0 && r.Code() != code[0]) {
		want := fmt.Sprint(status)
		if len(code) > 0 {
			want += " " + code[0]
		}
		t.Fatalf("want %s, got %d %s", want, r.Status, r.Body)
	}
}

// Run is a started task and the device that holds it: what a test that
// drives an execution acts on (claim generation 1).
type Run struct {
	D                          *Device
	TaskID, Token, ExecutionID string
}

// StartTask creates a task with payload, has d send its presence, claim it
// (it must be the task claimed: the oldest claimable one) and start it.
func (n *Node) StartTask(t testing.TB, d *Device, payload map[string]any) *Run {
	t.Helper()
	id := n.CreateTask(payload)
	Must(t, d.Ready(), http.StatusOK)
	got, tok, _ := d.MustClaim(t)
	if got != id {
		t.Fatalf("nodetest: claimed %s, want the new task %s (an older task is claimable)", got, id)
	}
	return &Run{D: d, TaskID: id, Token: tok, ExecutionID: d.MustStart(t, id, tok, 1, 2)}
}

// Act sends op for the run's execution; body adds to claim_generation and
// execution_id.
func (r *Run) Act(op string, body map[string]any) *Resp {
	m := map[string]any{"claim_generation": 1, "execution_id": r.ExecutionID}
	for k, v := range body {
		m[k] = v
	}
	return r.D.Call(r.TaskID, op, r.Token, m, "")
}

// Beat sends a running heartbeat with step.
func (r *Run) Beat(step string) *Resp { return r.Act("heartbeat", map[string]any{"step": step}) }

// Complete completes the run (expected version 3: started, not paused).
func (r *Run) Complete(result map[string]any) *Resp {
	return r.Act("complete", map[string]any{"expected_version": 3, "result": result})
}
