package bench

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/google/uuid"

	"taskledger/wire"
)

// HTTP drives a running server through the api.md contract. The
// generator shares the machine with the server it measures, so each
// request costs it little: bodies are appended into pooled buffers,
// answers read into them, idempotency keys counted rather than drawn, and
// requests go to the keep-alive transport directly (no client timeout
// timer; the run's context bounds them).
type HTTP struct {
	Base       string // e.g. http://127.0.0.1:8080 (without /api/v1)
	AdminToken string
	Client     *http.Client
	api        string // Base + "/api/v1"
	keys       *keySource
	raw        *rawClient // http:// servers (nil: Client)
}

// NewHTTP returns a driver with a keep-alive client sized for conns
// concurrent connections.
func NewHTTP(base, adminToken string, conns int) *HTTP {
	tr := &http.Transport{
		DialContext:         (&net.Dialer{Timeout: 5 * time.Second, KeepAlive: 30 * time.Second}).DialContext,
		MaxIdleConns:        conns + 16,
		MaxIdleConnsPerHost: conns + 16,
		IdleConnTimeout:     90 * time.Second,
	}
	base = strings.TrimSuffix(base, "/")
	h := &HTTP{Base: base, AdminToken: adminToken, Client: &http.Client{Transport: tr}, api: base + "/api/v1",
		keys: newKeySource()}
	if u, err := url.Parse(base); err == nil && u.Scheme == "http" && u.User == nil && u.RawQuery == "" {
		addr := u.Host
		if u.Port() == "" {
			addr = net.JoinHostPort(u.Hostname(), "80")
		}
		h.raw = &rawClient{addr: addr, host: u.Host, prefix: u.Path + "/api/v1"}
	}
	return h
}

// Close closes the driver's idle connections.
func (h *HTTP) Close() {
	h.Client.CloseIdleConnections()
	if h.raw != nil {
		h.raw.close()
	}
}

// keySource issues idempotency keys in the shape of a UUIDv4: 48 random
// bits drawn once per driver (so runs against the same server never
// collide), then a counter.
type keySource struct {
	prefix [14]byte // "xxxxxxxx-xxxx-"
	n      atomic.Uint64
}

func newKeySource() *keySource {
	var r [6]byte
	_, _ = rand.Read(r[:])
	k := &keySource{}
	const hex = "0123456789abcdef"
	j := 0
	for i, b := range r {
		if i == 4 {
			k.prefix[j] = '-'
			j++
		}
		k.prefix[j], k.prefix[j+1] = hex[b>>4], hex[b&15]
		j += 2
	}
	k.prefix[13] = '-'
	return k
}

// next returns a new key: prefix + "4ccc-8ccc-cccccccccccc" (c: counter).
func (k *keySource) next() string {
	var b [36]byte
	copy(b[:], k.prefix[:])
	copy(b[14:], "4000-8000-000000000000")
	n := k.n.Add(1)
	for i := 35; n > 0 && i > 14; i-- {
		switch i {
		case 18, 19, 23: // '-', '4'…'8' of version and variant
			continue
		}
		b[i] = "0123456789abcdef"[n&15]
		n >>= 4
	}
	return string(b[:])
}

var bufPool = sync.Pool{New: func() any { return new(bytes.Buffer) }}

// post sends body as JSON and decodes a JSON answer into out when the
// status is want; any other status is an error naming the answer's code.
// key and claimToken are sent when not empty.
func (h *HTTP) post(ctx context.Context, path, token string, body []byte, key, claimToken string, want int, out any) (int, error) {
	buf := bufPool.Get().(*bytes.Buffer)
	defer bufPool.Put(buf)
	buf.Reset()
	var arr [8]string
	hdr := append(arr[:0], "Authorization", "Bearer "+token, "Content-Type", "application/json")
	if key != "" {
		hdr = append(hdr, "Idempotency-Key", key)
	}
	if claimToken != "" {
		hdr = append(hdr, "X-Claim-Token", claimToken)
	}
	status, err := h.roundTrip(ctx, path, hdr, body, buf)
	if err != nil {
		return status, err
	}
	data := buf.Bytes()
	if status == http.StatusNoContent && want == http.StatusOK && strings.HasSuffix(path, "/claim-next") {
		return status, nil
	}
	if status != want {
		var e wire.Error
		_ = json.Unmarshal(data, &e)
		return status, fmt.Errorf("%w: POST %s: %d %s", ErrUnexpected, path, status, e.Code)
	}
	if out != nil {
		if err := json.Unmarshal(data, out); err != nil {
			return status, fmt.Errorf("%w: POST %s: %v", ErrUnexpected, path, err)
		}
	}
	return status, nil
}

// roundTrip sends the POST through the raw client (http://) or the
// transport and reads the answer's body into buf.
func (h *HTTP) roundTrip(ctx context.Context, path string, hdr []string, body []byte, buf *bytes.Buffer) (int, error) {
	if h.raw != nil {
		if err := ctx.Err(); err != nil {
			return 0, err
		}
		return h.raw.post(h.raw.prefix+path, hdr, body, buf)
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, h.api+path, bytes.NewReader(body))
	if err != nil {
		return 0, err
	}
	req.Header = make(http.Header, len(hdr)/2)
	for i := 0; i+1 < len(hdr); i += 2 {
		req.Header[hdr[i]] = []string{hdr[i+1]}
	}
	res, err := h.Client.Transport.RoundTrip(req)
	if err != nil {
		return 0, err
	}
	defer res.Body.Close()
	_, err = buf.ReadFrom(res.Body)
	return res.StatusCode, err
}

// body is a request body: a wire request type as JSON (the types always
// marshal: their raw members are constants here).
func body(v any) []byte {
	b, err := json.Marshal(v)
	if err != nil {
		panic(err)
	}
	return b
}

// RegisterDevice implements Driver.
func (h *HTTP) RegisterDevice(ctx context.Context) (*Device, error) {
	var out wire.Device
	_, err := h.post(ctx, "/admin/devices", h.AdminToken,
		body(wire.RegisterDeviceRequest{OwnerID: uuid.NewString(), Name: "bench-device", RequiredChecks: []string{"accessibility_connected", "target_app_installed"}}),
		h.keys.next(), "", http.StatusCreated, &out)
	if err != nil {
		return nil, err
	}
	return &Device{ID: out.DeviceID, OwnerID: out.OwnerID, Token: out.Token, Session: uuid.NewString()}, nil
}

// createBody is every created task's body.
var createBody = body(wire.CreateTaskRequest{Payload: json.RawMessage(taskPayload), Authorize: &wire.AuthorizeOptions{TTLSeconds: 86400}})

// CreateTask implements Driver.
func (h *HTTP) CreateTask(ctx context.Context) (string, error) {
	var out wire.TaskDetail
	_, err := h.post(ctx, "/admin/tasks", h.AdminToken, createBody, h.keys.next(), "", http.StatusCreated, &out)
	return out.ID, err
}

// Presence implements Driver.
func (h *HTTP) Presence(ctx context.Context, d *Device) error {
	var out wire.PresenceAnswer
	_, err := h.post(ctx, "/device/heartbeat", d.Token, body(wire.PresenceRequest{DeviceID: d.ID, AppVersion: "1.0.0",
		OSVersion: "Android 14", TargetAppVersion: "7.1.0", Checks: requiredChecks}), "", "", http.StatusOK, &out)
	if err == nil && !out.Claimable {
		err = fmt.Errorf("%w: presence not claimable", ErrUnexpected)
	}
	return err
}

// Claim implements Driver.
func (h *HTTP) Claim(ctx context.Context, d *Device) (*Claim, error) {
	tok := NewClaimToken()
	var out wire.ClaimAnswer
	status, err := h.post(ctx, "/device/tasks/claim-next", d.Token, body(wire.ClaimRequest{DeviceID: d.ID, SessionID: d.Session}),
		h.keys.next(), tok, http.StatusOK, &out)
	if err != nil || status == http.StatusNoContent {
		return nil, err
	}
	return &Claim{TaskID: out.Task.ID, Token: tok, Generation: out.ClaimGeneration, Version: out.Version}, nil
}

// call sends a task-scoped command with the body req.
func (h *HTTP) call(ctx context.Context, op string, d *Device, c *Claim, req any) (*wire.DeviceTaskAnswer, error) {
	var out wire.DeviceTaskAnswer
	b := body(req)
	if _, err := h.post(ctx, "/device/tasks/"+c.TaskID+"/"+op, d.Token, b, h.keys.next(), c.Token, http.StatusOK, &out); err != nil {
		return nil, err
	}
	c.Version = out.Version
	return &out, nil
}

// Release implements Driver.
func (h *HTTP) Release(ctx context.Context, d *Device, c *Claim) error {
	_, err := h.call(ctx, "release", d, c, wire.ClaimVersionRequest{DeviceID: d.ID, ClaimGeneration: c.Generation, ExpectedVersion: c.Version})
	return err
}

// Start implements Driver.
func (h *HTTP) Start(ctx context.Context, d *Device, c *Claim) error {
	out, err := h.call(ctx, "start", d, c, wire.ClaimVersionRequest{DeviceID: d.ID, ClaimGeneration: c.Generation, ExpectedVersion: c.Version})
	if err == nil {
		c.ExecutionID = out.ExecutionID
	}
	return err
}

// Heartbeat implements Driver.
func (h *HTTP) Heartbeat(ctx context.Context, d *Device, c *Claim) (bool, error) {
	out, err := h.call(ctx, "heartbeat", d, c, wire.HeartbeatRequest{DeviceID: d.ID, ClaimGeneration: c.Generation,
		ExecutionID: c.ExecutionID, Step: c.Step})
	if err != nil {
		return false, err
	}
	return out.CancelRequested, nil
}

// cancelBody is every operator cancel's body.
var cancelBody = body(wire.CancelRequest{Reason: "bench"})

// Cancel implements Driver.
func (h *HTTP) Cancel(ctx context.Context, taskID string) error {
	_, err := h.post(ctx, "/admin/tasks/"+taskID+"/cancel", h.AdminToken, cancelBody, h.keys.next(), "", http.StatusOK, nil)
	return err
}

// CancelAck implements Driver.
func (h *HTTP) CancelAck(ctx context.Context, d *Device, c *Claim) error {
	_, err := h.call(ctx, "cancel-ack", d, c, wire.ExecutionRequest{DeviceID: d.ID, ClaimGeneration: c.Generation,
		ExecutionID: c.ExecutionID, ExpectedVersion: c.Version})
	return err
}
