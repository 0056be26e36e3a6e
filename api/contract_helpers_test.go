package api_test

// Shared helpers of the HTTP contract tests (contract_*_test.go): every
// test drives a real in-process node started by apptest, whose cleanup
// verifies the log and compares replayed projections with the live ones.

import (
	"bytes"
	"io"
	"net/http"
	"testing"

	"github.com/google/uuid"

	"taskledger/node/nodetest"
)

const (
	ctDevicePath = "/api/v1/device"
	ctAdminPath  = "/api/v1/admin"
	ctClaimNext  = ctDevicePath + "/tasks/claim-next"
	ctPresence   = ctDevicePath + "/heartbeat"
)

// ctErr asserts an error answer: exact status and exact code.
func ctErr(t *testing.T, r *nodetest.Resp, status int, code string) {
	t.Helper()
	nodetest.Must(t, r, status, code)
	if m := r.JSON(); len(m) != 2 || nodetest.Str(m, "message") == "" {
		t.Fatalf("error body must be {code, message}: %s", r.Body)
	}
}

// ctSame asserts that the head did not move since before (nothing appended).
func ctSame(t *testing.T, n *nodetest.Node, before uint64) {
	t.Helper()
	if h := n.Head(); h != before {
		t.Fatalf("head moved from %d to %d: something was appended", before, h)
	}
}

// ctRefused asserts an error answer that appended nothing.
func ctRefused(t *testing.T, n *nodetest.Node, before uint64, r *nodetest.Resp, status int, code string) {
	t.Helper()
	ctErr(t, r, status, code)
	ctSame(t, n, before)
}

// ctUnauthorized asserts the 401 answer of api.md: empty body and
// WWW-Authenticate: Bearer.
func ctUnauthorized(t *testing.T, r *nodetest.Resp) {
	t.Helper()
	if r.Status != http.StatusUnauthorized || len(r.Body) != 0 || r.Header.Get("WWW-Authenticate") != "Bearer" {
		t.Fatalf("want 401 with empty body and WWW-Authenticate: Bearer, got %d %q (WWW-Authenticate %q)",
			r.Status, r.Body, r.Header.Get("WWW-Authenticate"))
	}
}

// ctReplayed asserts a replay: the original status and body, with the
// Idempotent-Replayed header.
func ctReplayed(t *testing.T, first, again *nodetest.Resp) {
	t.Helper()
	if again.Header.Get("Idempotent-Replayed") != "true" {
		t.Fatalf("replay lacks Idempotent-Replayed: true (status %d %s)", again.Status, again.Body)
	}
	if first.Header.Get("Idempotent-Replayed") != "" {
		t.Fatalf("first answer carries Idempotent-Replayed")
	}
	if again.Status != first.Status || !bytes.Equal(again.Body, first.Body) {
		t.Fatalf("replay differs:\nfirst  %d %s\nreplay %d %s", first.Status, first.Body, again.Status, again.Body)
	}
}

// ctRaw sends a request with full control of the body: body is sent as
// is, or chunked (unknown length) when chunked is set. headers are set as
// given (no automatic Content-Type or Idempotency-Key).
func ctRaw(t *testing.T, n *nodetest.Node, method, path, token string, body []byte, chunked bool, headers map[string]string) *nodetest.Resp {
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
	return &nodetest.Resp{Status: res.StatusCode, Header: res.Header, Body: raw}
}

// ctJSONHeaders are the headers of a JSON mutation with a new key.
func ctJSONHeaders(extra map[string]string) map[string]string {
	h := map[string]string{"Content-Type": "application/json", "Idempotency-Key": nodetest.NewKey()}
	for k, v := range extra {
		h[k] = v
	}
	return h
}

// ctReadyDevice registers a device and sends a ready presence heartbeat.
func ctReadyDevice(t *testing.T, n *nodetest.Node) *nodetest.Device {
	t.Helper()
	d := n.RegisterDevice()
	nodetest.Must(t, d.Ready(), http.StatusOK)
	return d
}

// ctClaim makes d claim with a new key and token and returns the claimed
// task id, the token and the answer.
func ctClaim(t *testing.T, d *nodetest.Device) (string, string, *nodetest.Resp) {
	t.Helper()
	r, tok := d.Claim()
	nodetest.Must(t, r, http.StatusOK)
	return ctTaskOf(r), tok, r
}

// ctTaskOf returns the task id of a claim answer.
func ctTaskOf(r *nodetest.Resp) string {
	task, _ := r.JSON()["task"].(map[string]any)
	return nodetest.Str(task, "id")
}

// ctStart starts the claimed task (generation gen, version 2) and returns
// its execution id.
func ctStart(t *testing.T, d *nodetest.Device, id, tok string, gen uint64) string {
	t.Helper()
	r := d.Call(id, "start", tok, map[string]any{"claim_generation": gen, "expected_version": 2}, "")
	nodetest.Must(t, r, http.StatusOK)
	ex := nodetest.Str(r.JSON(), "execution_id")
	if ex == "" {
		t.Fatalf("start without execution_id: %s", r.Body)
	}
	return ex
}

// ctCancel sends an operator cancel and returns the answer.
func ctCancel(n *nodetest.Node, id string) *nodetest.Resp {
	return n.Do("POST", ctAdminPath+"/tasks/"+id+"/cancel", n.AdminToken, map[string]any{"reason": "operator says stop"}, nil)
}

// ctState returns the task's state and version from its detail document.
func ctState(n *nodetest.Node, id string) (string, uint64) {
	m := n.Task(id)
	return nodetest.Str(m, "state"), nodetest.Num(m, "version")
}

// ctNewID returns a random canonical UUIDv4.
func ctNewID() string { return uuid.NewString() }
