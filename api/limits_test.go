package api_test

import (
	"io"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"taskledger/api"
	"taskledger/node/nodetest"
)

// fakeNow is a clock the rate limits refill by.
type fakeNow struct {
	mu sync.Mutex
	t  time.Time
}

func (f *fakeNow) now() time.Time { f.mu.Lock(); defer f.mu.Unlock(); return f.t }
func (f *fakeNow) advance(d time.Duration) {
	f.mu.Lock()
	f.t = f.t.Add(d)
	f.mu.Unlock()
}

func limitedNode(t *testing.T, l api.Limits) (*nodetest.Node, *fakeNow) {
	n := nodetest.Start(t)
	clk := &fakeNow{t: time.Unix(1_800_000_000, 0)}
	l.Now = clk.now
	n.API.SetLimits(l)
	return n, clk
}

// metricLine returns the /metrics line that starts with prefix.
func metricLine(t *testing.T, n *nodetest.Node, prefix string) string {
	t.Helper()
	r := n.Do("GET", "/metrics", "", nil, nil)
	for _, l := range strings.Split(string(r.Body), "\n") {
		if strings.HasPrefix(l, prefix) {
			return l
		}
	}
	t.Fatalf("no metric %s", prefix)
	return ""
}

// A device past its bucket is answered 429 rate_limited with Retry-After,
// on every device route, and nothing is appended; the bucket refills with
// time and the refusals are counted.
func TestDeviceRateLimitRefusesWith429(t *testing.T) {
	n, clk := limitedNode(t, api.Limits{DeviceRate: 1, DeviceBurst: 2})
	n.CreateTask(map[string]any{"k": "v"})
	d := n.RegisterDevice()
	nodetest.Must(t, d.Ready(), http.StatusOK)
	nodetest.Must(t, d.Ready(), http.StatusOK)
	before := n.Head()
	r, _ := d.Claim()
	n.MustRefuse(t, before, r, http.StatusTooManyRequests, "rate_limited")
	if r.Header.Get("Retry-After") != "1" {
		t.Fatalf("Retry-After %q, want 1", r.Header.Get("Retry-After"))
	}
	n.MustRefuse(t, before, d.Ready(), http.StatusTooManyRequests, "rate_limited")
	// Another device has its own bucket; admins are not limited.
	other := n.RegisterDevice()
	nodetest.Must(t, other.Ready(), http.StatusOK)
	if got := metricLine(t, n, `taskledger_rate_limited_total{limit="device"}`); !strings.HasSuffix(got, " 2") {
		t.Fatalf("metric %q, want 2 refusals", got)
	}
	clk.advance(time.Second)
	r, _ = d.Claim()
	nodetest.Must(t, r, http.StatusOK)
}

// Requests that fail authentication spend their address's bucket: past
// it, 429 rate_limited instead of 401; a valid token is not limited.
func TestUnauthenticatedAddressRateLimit(t *testing.T) {
	n, clk := limitedNode(t, api.Limits{AddressRate: 0.5, AddressBurst: 2})
	for range 2 {
		nodetest.MustUnauthorized(t, n.Do("GET", "/api/v1/admin/tasks", "wrong-token", nil, nil))
	}
	r := n.Do("GET", "/api/v1/admin/tasks", "wrong-token", nil, nil)
	nodetest.MustError(t, r, http.StatusTooManyRequests, "rate_limited")
	if r.Header.Get("Retry-After") != "2" {
		t.Fatalf("Retry-After %q, want 2", r.Header.Get("Retry-After"))
	}
	nodetest.MustError(t, n.Do("POST", "/api/v1/device/heartbeat", "", map[string]any{}, nil), http.StatusTooManyRequests, "rate_limited")
	nodetest.Must(t, n.Do("GET", "/api/v1/admin/tasks", n.AdminToken, nil, nil), http.StatusOK)
	if got := metricLine(t, n, `taskledger_rate_limited_total{limit="address"}`); !strings.HasSuffix(got, " 2") {
		t.Fatalf("metric %q, want 2 refusals", got)
	}
	clk.advance(2 * time.Second)
	nodetest.MustUnauthorized(t, n.Do("GET", "/api/v1/admin/tasks", "wrong-token", nil, nil))
}

// send sends a request with repeated headers as given.
func send(t *testing.T, n *nodetest.Node, method, path string, body string, headers [][2]string) *nodetest.Resp {
	t.Helper()
	var rd io.Reader
	if body != "" {
		rd = strings.NewReader(body)
	}
	req, err := http.NewRequest(method, n.URL+path, rd)
	if err != nil {
		t.Fatal(err)
	}
	for _, h := range headers {
		req.Header.Add(h[0], h[1])
	}
	res, err := n.HTTP.Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v", method, path, err)
	}
	defer res.Body.Close()
	raw, _ := io.ReadAll(res.Body)
	return &nodetest.Resp{Status: res.StatusCode, Header: res.Header, Body: raw}
}

// Two Content-Type or two Authorization headers, or a repeated query
// parameter, are ambiguous: 400 ambiguous_request, nothing appended.
func TestAmbiguousRequestsAreRefused(t *testing.T) {
	n := nodetest.Start(t)
	before := n.Head()
	body := `{"payload": {"k": "v"}}`
	auth := [2]string{"Authorization", "Bearer " + n.AdminToken}
	key := [2]string{"Idempotency-Key", nodetest.NewKey()}
	ct := [2]string{"Content-Type", "application/json"}
	cases := map[string]*nodetest.Resp{
		"two Content-Type": send(t, n, "POST", "/api/v1/admin/tasks", body,
			[][2]string{auth, key, ct, {"Content-Type", "text/plain"}}),
		"two equal Content-Type": send(t, n, "POST", "/api/v1/admin/tasks", body, [][2]string{auth, key, ct, ct}),
		"two Authorization": send(t, n, "POST", "/api/v1/admin/tasks", body,
			[][2]string{auth, {"Authorization", "Bearer other"}, key, ct}),
		"a combined Authorization": send(t, n, "GET", "/api/v1/admin/tasks", "",
			[][2]string{{"Authorization", "Bearer " + n.AdminToken + ", Bearer x"}}),
		"repeated query parameter": send(t, n, "GET", "/api/v1/admin/tasks?limit=1&limit=2", "", [][2]string{auth}),
		"repeated escaped name":    send(t, n, "GET", "/api/v1/admin/events?after=0&%61fter=1", "", [][2]string{auth}),
	}
	for name, r := range cases {
		if r.Status != http.StatusBadRequest || r.Code() != "ambiguous_request" {
			t.Errorf("%s: %d %s, want 400 ambiguous_request", name, r.Status, r.Body)
		}
	}
	n.MustUnchanged(t, before)
	nodetest.Must(t, send(t, n, "GET", "/api/v1/admin/tasks?limit=1", "", [][2]string{auth}), http.StatusOK)
}

// A lone UTF-16 surrogate escape is refused (400 invalid_request, nothing
// appended); a proper pair is a character like any other.
func TestLoneSurrogateEscapeIsRefused(t *testing.T) {
	n := nodetest.Start(t)
	before := n.Head()
	for _, p := range []string{`"\ud800"`, `"\udc00"`, `"a\ud83dx"`, `"\ud83d\u0041"`, `"\ud83d\\ude00"`} {
		body := `{"payload": {"k": ` + p + `}}`
		r := n.Raw(t, "POST", "/api/v1/admin/tasks", n.AdminToken, []byte(body), false, nodetest.JSONHeaders(nil))
		n.MustRefuse(t, before, r, http.StatusBadRequest, "invalid_request")
	}
	d := n.RegisterDevice()
	before = n.Head()
	r := n.Raw(t, "POST", nodetest.Presence, d.Token, []byte(`{"device_id": "`+d.ID+`", "app_version": "1\udfff", "os_version": "x", "target_app_version": "y", "checks": {"a": true}}`), false,
		map[string]string{"Content-Type": "application/json"})

	n.MustRefuse(t, before, r, http.StatusBadRequest, "invalid_request")
	ok := n.Raw(t, "POST", "/api/v1/admin/tasks", n.AdminToken, []byte(`{"payload": {"k": "\ud83d\ude00 \\ud800"}}`), false, nodetest.JSONHeaders(nil))
	nodetest.Must(t, ok, http.StatusCreated)
}

// Every route answers HEAD and methods it does not have with 405 and an
// Allow header naming its methods, before authentication; nothing is
// appended.
func TestWrongMethodsAnswer405WithAllow(t *testing.T) {
	n := nodetest.Start(t)
	before := n.Head()
	id := nodetest.NewID()
	seen := 0
	methods := map[string]string{}
	for _, rt := range n.API.Echo().Routes() {
		methods[rt.Path] += " " + rt.Method
	}
	for _, rt := range n.API.Echo().Routes() {
		if !strings.HasPrefix(rt.Path, "/") || strings.HasPrefix(rt.Method, "echo_") || strings.Contains(rt.Path, "test-clock") {
			continue
		}
		path := strings.NewReplacer(":id", id, ":eid", id).Replace(rt.Path)
		if strings.Contains(path, "*") || strings.Contains(path, ":") {
			continue
		}
		for _, m := range []string{"HEAD", "DELETE", "PATCH", "OPTIONS"} {
			r := n.Do(m, path, n.AdminToken, nil, nil)
			allow := r.Header.Get("Allow")
			if r.Status != http.StatusMethodNotAllowed || !strings.Contains(allow, rt.Method) {
				t.Errorf("%s %s: %d (Allow %q), want 405 with Allow naming %s", m, path, r.Status, allow, rt.Method)
			}
			if m != "HEAD" && r.Code() != "method_not_allowed" {
				t.Errorf("%s %s: code %q", m, path, r.Code())
			}
			seen++
		}
		for _, wrong := range []string{"GET", "POST", "PUT"} {
			if strings.Contains(methods[rt.Path], wrong) {
				continue
			}
			if r := n.Do(wrong, path, "", nil, nil); r.Status != http.StatusMethodNotAllowed || strings.Contains(r.Header.Get("Allow"), wrong) {
				t.Errorf("%s %s (no token): %d (Allow %q), want 405", wrong, path, r.Status, r.Header.Get("Allow"))
			}
		}
	}
	if seen < 4*25 {
		t.Fatalf("only %d method checks: the route table was not walked", seen)
	}
	n.MustUnchanged(t, before)
}
