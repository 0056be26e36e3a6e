package bench

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"time"

	"github.com/google/uuid"
)

// HTTP drives a running server through the api.md contract.
type HTTP struct {
	Base       string // e.g. http://127.0.0.1:8080 (without /api/v1)
	AdminToken string
	Client     *http.Client
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
	return &HTTP{Base: strings.TrimSuffix(base, "/"), AdminToken: adminToken,
		Client: &http.Client{Transport: tr, Timeout: 60 * time.Second}}
}

// send posts body as JSON and decodes a JSON answer into out when the
// status is want; any other status is an error naming the answer's code.
func (h *HTTP) send(ctx context.Context, path, token string, body any, hdr map[string]string, want int, out any) (int, error) {
	raw, err := json.Marshal(body)
	if err != nil {
		return 0, err
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, h.Base+"/api/v1"+path, bytes.NewReader(raw))
	if err != nil {
		return 0, err
	}
	req.Header.Set("Authorization", "Bearer "+token)
	req.Header.Set("Content-Type", "application/json")
	for k, v := range hdr {
		req.Header.Set(k, v)
	}
	res, err := h.Client.Do(req)
	if err != nil {
		return 0, err
	}
	defer res.Body.Close()
	data, err := io.ReadAll(res.Body)
	if err != nil {
		return res.StatusCode, err
	}
	if res.StatusCode == http.StatusNoContent && want == http.StatusOK && strings.HasSuffix(path, "/claim-next") {
		return res.StatusCode, nil
	}
	if res.StatusCode != want {
		var e struct {
			Code string `json:"code"`
		}
		_ = json.Unmarshal(data, &e)
		return res.StatusCode, fmt.Errorf("%w: POST %s: %d %s", ErrUnexpected, path, res.StatusCode, e.Code)
	}
	if out != nil {
		if err := json.Unmarshal(data, out); err != nil {
			return res.StatusCode, fmt.Errorf("%w: POST %s: %v", ErrUnexpected, path, err)
		}
	}
	return res.StatusCode, nil
}

func newKey() map[string]string { return map[string]string{"Idempotency-Key": uuid.NewString()} }

// RegisterDevice implements Driver.
func (h *HTTP) RegisterDevice(ctx context.Context) (*Device, error) {
	var out struct {
		DeviceID string `json:"device_id"`
		OwnerID  string `json:"owner_id"`
		Token    string `json:"token"`
	}
	_, err := h.send(ctx, "/admin/devices", h.AdminToken,
		map[string]any{"owner_id": uuid.NewString(), "name": "bench-device", "required_checks": []string{"accessibility_connected", "target_app_installed"}},
		newKey(), http.StatusCreated, &out)
	if err != nil {
		return nil, err
	}
	return &Device{ID: out.DeviceID, OwnerID: out.OwnerID, Token: out.Token, Session: uuid.NewString()}, nil
}

// CreateTask implements Driver.
func (h *HTTP) CreateTask(ctx context.Context) (string, error) {
	var out struct {
		ID string `json:"id"`
	}
	_, err := h.send(ctx, "/admin/tasks", h.AdminToken,
		map[string]any{"payload": json.RawMessage(taskPayload), "authorize": map[string]any{"ttl_seconds": 86400}},
		newKey(), http.StatusCreated, &out)
	return out.ID, err
}

// Presence implements Driver.
func (h *HTTP) Presence(ctx context.Context, d *Device) error {
	var out struct {
		Claimable bool `json:"claimable"`
	}
	_, err := h.send(ctx, "/device/heartbeat", d.Token, map[string]any{"device_id": d.ID, "app_version": "1.0.0",
		"os_version": "Android 14", "target_app_version": "7.1.0", "checks": requiredChecks}, nil, http.StatusOK, &out)
	if err == nil && !out.Claimable {
		err = fmt.Errorf("%w: presence not claimable", ErrUnexpected)
	}
	return err
}

// taskAnswer is the part of a device task response the generator uses.
type taskAnswer struct {
	TaskID          string `json:"task_id"`
	Version         uint64 `json:"version"`
	Generation      uint64 `json:"claim_generation"`
	ExecutionID     string `json:"execution_id"`
	CancelRequested bool   `json:"cancel_requested"`
	Task            struct {
		ID string `json:"id"`
	} `json:"task"`
}

// Claim implements Driver.
func (h *HTTP) Claim(ctx context.Context, d *Device) (*Claim, error) {
	tok := NewClaimToken()
	hdr := newKey()
	hdr["X-Claim-Token"] = tok
	var out taskAnswer
	status, err := h.send(ctx, "/device/tasks/claim-next", d.Token,
		map[string]any{"device_id": d.ID, "session_id": d.Session}, hdr, http.StatusOK, &out)
	if err != nil || status == http.StatusNoContent {
		return nil, err
	}
	return &Claim{TaskID: out.Task.ID, Token: tok, Generation: out.Generation, Version: out.Version}, nil
}

func (h *HTTP) call(ctx context.Context, op string, d *Device, c *Claim, extra map[string]any) (*taskAnswer, error) {
	body := map[string]any{"device_id": d.ID, "claim_generation": c.Generation}
	for k, v := range extra {
		body[k] = v
	}
	hdr := newKey()
	hdr["X-Claim-Token"] = c.Token
	var out taskAnswer
	if _, err := h.send(ctx, "/device/tasks/"+c.TaskID+"/"+op, d.Token, body, hdr, http.StatusOK, &out); err != nil {
		return nil, err
	}
	c.Version = out.Version
	return &out, nil
}

// Release implements Driver.
func (h *HTTP) Release(ctx context.Context, d *Device, c *Claim) error {
	_, err := h.call(ctx, "release", d, c, map[string]any{"expected_version": c.Version})
	return err
}

// Start implements Driver.
func (h *HTTP) Start(ctx context.Context, d *Device, c *Claim) error {
	out, err := h.call(ctx, "start", d, c, map[string]any{"expected_version": c.Version})
	if err == nil {
		c.ExecutionID = out.ExecutionID
	}
	return err
}

// Heartbeat implements Driver.
func (h *HTTP) Heartbeat(ctx context.Context, d *Device, c *Claim) (bool, error) {
	out, err := h.call(ctx, "heartbeat", d, c, map[string]any{"execution_id": c.ExecutionID, "step": c.Step})
	if err != nil {
		return false, err
	}
	return out.CancelRequested, nil
}

// Cancel implements Driver.
func (h *HTTP) Cancel(ctx context.Context, taskID string) error {
	_, err := h.send(ctx, "/admin/tasks/"+taskID+"/cancel", h.AdminToken, map[string]any{"reason": "bench"},
		newKey(), http.StatusOK, nil)
	return err
}

// CancelAck implements Driver.
func (h *HTTP) CancelAck(ctx context.Context, d *Device, c *Claim) error {
	_, err := h.call(ctx, "cancel-ack", d, c, map[string]any{"execution_id": c.ExecutionID, "expected_version": c.Version})
	return err
}
