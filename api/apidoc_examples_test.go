package api_test

// The examples of docs/api.md come from a live server: this test drives
// every route of a real node (manual clock frozen at a fixed time) and
// records each exchange it names. Each example in the doc sits after a
// marker line `<!-- example: NAME -->`. With -update the test rewrites
// every marked block from the live exchange; without it, it fails when a
// marked block has no live exchange, when a live exchange has no marker,
// or when a block's shape differs from the live one: the request or status
// line, the listed headers (names and values, ids and times aside), and the
// body (the same JSON keys with the same JSON types at every depth, arrays
// of the same length; text bodies line by line).
//
//	go test ./api -run TestAPIDocExamplesAreLive -update

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"image"
	"image/jpeg"
	"image/png"
	"io"
	"net/http"
	"os"
	"regexp"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"

	"taskledger/api"
	"taskledger/commands"
	"taskledger/node"
	"taskledger/node/nodetest"
)

var updateAPIDoc = flag.Bool("update", false, "rewrite the examples of docs/api.md from a live server")

const apiDocPath = "../docs/api.md"

// docStart is the frozen start of the manual clock of the examples.
var docStart = time.Date(2026, 12, 1, 9, 0, 0, 0, time.UTC)

// exampleBlock is a marker and the fenced block after it.
var exampleBlock = regexp.MustCompile("(?s)<!-- example: ([A-Za-z0-9._/-]+) -->\n```http\n(.*?)```")

// shownRequestHeaders and shownAnswerHeaders are the headers an example
// shows, in this order.
var (
	shownRequestHeaders = []string{"Authorization", "Content-Type", "Idempotency-Key", "X-Claim-Token",
		"X-Claim-Generation", "X-Execution-Id", "X-Evidence-Kind", "X-Captured-At", "Last-Event-ID"}
	shownAnswerHeaders = []string{"Content-Type", "Location", "Allow", "WWW-Authenticate", "Retry-After",
		"Idempotent-Replayed", "Cache-Control", "Content-Security-Policy"}
)

// docRecorder sends requests and keeps the exchanges the doc shows.
type docRecorder struct {
	t       *testing.T
	n       *nodetest.Node
	names   map[string]string // token → how an example shows it
	ex      map[string]string // example name → rendered text
	summary map[string]bool   // examples whose body is shown as its size only
}

type hdrs [][2]string

func (d *docRecorder) record(name, text string) {
	d.t.Helper()
	if name == "" {
		return
	}
	if _, dup := d.ex[name]; dup {
		d.t.Fatalf("example %q recorded twice", name)
	}
	d.ex[name] = text
}

// call sends one request to n and records it as reqName and its answer as
// ansName ("" records nothing).
func (d *docRecorder) call(n *nodetest.Node, reqName, ansName, method, path, token string, h hdrs, body []byte) *nodetest.Resp {
	d.t.Helper()
	var rd io.Reader
	if body != nil {
		rd = bytes.NewReader(body)
	}
	req, err := http.NewRequest(method, n.URL+path, rd)
	if err != nil {
		d.t.Fatal(err)
	}
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	for _, kv := range h {
		if kv[1] == "" {
			req.Header.Del(kv[0])
		} else {
			req.Header.Set(kv[0], kv[1])
		}
	}
	cl := *n.HTTP // redirects are answers to show, not to follow
	cl.CheckRedirect = func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }
	res, err := cl.Do(req)
	if err != nil {
		d.t.Fatalf("%s %s: %v", method, path, err)
	}
	defer res.Body.Close()
	raw, _ := io.ReadAll(res.Body)
	d.record(reqName, d.renderRequest(req, body))
	d.record(ansName, d.renderAnswer(ansName, res.StatusCode, res.Header, raw))
	return &nodetest.Resp{Status: res.StatusCode, Header: res.Header, Body: raw}
}

// json sends a JSON body with a new Idempotency-Key (for the POST and PUT
// routes that take one) unless h names one.
func (d *docRecorder) json(n *nodetest.Node, reqName, ansName, method, path, token string, h hdrs, body any) *nodetest.Resp {
	d.t.Helper()
	raw, err := json.Marshal(body)
	if err != nil {
		d.t.Fatal(err)
	}
	all := hdrs{{"Content-Type", "application/json"}}
	hasKey := false
	for _, kv := range h {
		hasKey = hasKey || kv[0] == "Idempotency-Key"
	}
	if !hasKey && method != "GET" && !strings.HasSuffix(path, "/device/heartbeat") && !strings.HasSuffix(path, "/test-clock/advance") {
		all = append(all, [2]string{"Idempotency-Key", nodetest.NewKey()})
	}
	return d.call(n, reqName, ansName, method, path, token, append(all, h...), raw)
}

func (d *docRecorder) renderRequest(req *http.Request, body []byte) string {
	var b strings.Builder
	b.WriteString(req.Method + " " + req.URL.RequestURI() + "\n")
	for _, name := range shownRequestHeaders {
		v := req.Header.Get(name)
		if v == "" {
			continue
		}
		if name == "Authorization" {
			tok := strings.TrimPrefix(v, "Bearer ")
			shown, ok := d.names[tok]
			if !ok {
				shown = "<unknown token>"
			}
			v = "Bearer " + shown
		}
		b.WriteString(name + ": " + v + "\n")
	}
	writeBody(&b, req.Header.Get("Content-Type"), body, false)
	return b.String()
}

func (d *docRecorder) renderAnswer(name string, status int, h http.Header, body []byte) string {
	var b strings.Builder
	fmt.Fprintf(&b, "HTTP/1.1 %d %s\n", status, http.StatusText(status))
	for _, k := range shownAnswerHeaders {
		if v := h.Get(k); v != "" {
			b.WriteString(k + ": " + v + "\n")
		}
	}
	writeBody(&b, h.Get("Content-Type"), body, d.summary[name])
	return b.String()
}

// metricLines are the series a /metrics example shows (it lists many
// more).
var metricLines = []string{"# TYPE taskledger_claims_total", "taskledger_claims_total ",
	"# TYPE taskledger_commands_total", `taskledger_commands_total{outcome="ok",type="claim-next"}`,
	"taskledger_append_batch_size_count", "taskledger_tasks_needing_operator "}

func writeBody(b *strings.Builder, ctype string, body []byte, summary bool) {
	if len(body) == 0 {
		return
	}
	b.WriteString("\n")
	mt := strings.TrimSpace(strings.Split(ctype, ";")[0])
	switch {
	case summary || strings.HasPrefix(mt, "image/") || mt == "text/html" || mt == "text/javascript" || mt == "text/css":
		fmt.Fprintf(b, "<%d bytes of %s>\n", len(body), mt)
	case mt == "application/json":
		var out bytes.Buffer
		if err := json.Indent(&out, body, "", "  "); err != nil {
			b.Write(body)
		} else {
			b.Write(bytes.TrimRight(out.Bytes(), "\n"))
		}
		b.WriteString("\n")
	case strings.HasPrefix(ctype, "text/plain; version="): // Prometheus
		for _, line := range strings.Split(string(body), "\n") {
			for _, p := range metricLines {
				if strings.HasPrefix(line, p) {
					b.WriteString(line + "\n")
				}
			}
		}
		b.WriteString("…\n")
	default:
		b.WriteString(strings.TrimRight(string(body), "\n") + "\n")
	}
}

// stream reads an event stream until it has sent want events, and records
// the request and that much of the answer.
func (d *docRecorder) stream(n *nodetest.Node, reqName, ansName, path string, h hdrs, want int) {
	d.t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, "GET", n.URL+path, nil)
	req.Header.Set("Authorization", "Bearer "+n.AdminToken)
	for _, kv := range h {
		req.Header.Set(kv[0], kv[1])
	}
	res, err := n.HTTP.Do(req)
	if err != nil {
		d.t.Fatal(err)
	}
	defer res.Body.Close()
	var got bytes.Buffer
	rd := bufio.NewReader(res.Body)
	for events := 0; events < want; {
		line, err := rd.ReadString('\n')
		if err != nil {
			d.t.Fatalf("event stream: %v after %q", err, got.String())
		}
		got.WriteString(line)
		if strings.HasPrefix(line, "data: ") {
			events++
		}
	}
	d.record(reqName, d.renderRequest(req, nil))
	d.record(ansName, d.renderAnswer(ansName, res.StatusCode, res.Header, got.Bytes()))
}

// grayPNG is a 2×2 gray PNG (the example bodies of docs/api.md).
func grayPNG(t *testing.T) []byte {
	var b bytes.Buffer
	if err := png.Encode(&b, image.NewGray(image.Rect(0, 0, 2, 2))); err != nil {
		t.Fatal(err)
	}
	return b.Bytes()
}

// grayJPEG is a 2×2 gray JPEG (the example bodies of docs/api.md).
func grayJPEG(t *testing.T) []byte {
	var b bytes.Buffer
	if err := jpeg.Encode(&b, image.NewGray(image.Rect(0, 0, 2, 2)), nil); err != nil {
		t.Fatal(err)
	}
	return b.Bytes()
}

// liveExamples drives every route and returns the rendered exchanges.
func liveExamples(t *testing.T) map[string]string {
	secret := bytes.Repeat([]byte{7}, 32)
	clock := func(c *node.Config) { c.Clock = commands.NewManualClock(docStart) }
	n := nodetest.Start(t, clock, nodetest.WithConfig(func(c *commands.Config) { c.ClaimSecret = secret }))
	d := &docRecorder{t: t, n: n, names: map[string]string{n.AdminToken: "<admin token>"}, ex: map[string]string{},
		summary: map[string]bool{"openapi.200": true, "audit-bundle.200": true}}
	adm := n.AdminToken
	A := "/api/v1/admin"
	D := "/api/v1/device"

	// Operational routes.
	d.call(n, "healthz.request", "healthz.200", "GET", "/healthz", "", nil, nil)
	d.call(n, "readyz.request", "readyz.200", "GET", "/readyz", "", nil, nil)
	d.call(n, "openapi.request", "openapi.200", "GET", "/api/v1/openapi.json", "", nil, nil)
	d.call(n, "", "root.302", "GET", "/", "", nil, nil)
	d.call(n, "", "console-redirect.301", "GET", "/console", "", nil, nil)
	d.call(n, "", "favicon.301", "GET", "/favicon.ico", "", nil, nil)
	d.call(n, "console.request", "console.200", "GET", "/console/", "", nil, nil)

	// Devices.
	owner := uuid.NewString()
	regKey := nodetest.NewKey()
	reg := d.json(n, "register-device.request", "register-device.201", "POST", A+"/devices", adm,
		hdrs{{"Idempotency-Key", regKey}}, map[string]any{"owner_id": owner, "name": "pixel-7-lab-3",
			"required_checks": []string{"accessibility_connected", "target_app_installed"}})
	nodetest.Must(t, reg, 201)
	dev := reg.JSON()
	devID, devTok := dev["device_id"].(string), dev["token"].(string)
	d.names[devTok] = "<device token>"
	d.json(n, "", "register-device.replay", "POST", A+"/devices", adm, hdrs{{"Idempotency-Key", regKey}},
		map[string]any{"owner_id": owner, "name": "pixel-7-lab-3",
			"required_checks": []string{"accessibility_connected", "target_app_installed"}})

	presence := func(id string) map[string]any {
		return map[string]any{"device_id": id, "app_version": "1.4.2", "os_version": "Android 14",
			"target_app_version": "7.1.0", "checks": map[string]bool{"accessibility_connected": true, "target_app_installed": true},
			"active_task_id": nil, "client_time": "2026-12-01T08:59:59.250Z"}
	}
	r := d.json(n, "presence.request", "presence.200", "POST", D+"/heartbeat", devTok, nil, presence(devID))
	nodetest.Must(t, r, 200)
	d.call(n, "list-devices.request", "list-devices.200", "GET", A+"/devices", adm, nil, nil)
	d.call(n, "get-device.request", "get-device.200", "GET", A+"/devices/"+devID, adm, nil, nil)

	// A task: created, given a reference image, amended, authorized.
	r = d.json(n, "create-task.request", "create-task.201", "POST", A+"/tasks", adm, nil,
		map[string]any{"payload": map[string]any{"action": "open_url", "url": "https://example.com/a"}})
	nodetest.Must(t, r, 201)
	taskA := nodetest.Str(r.JSON(), "id")
	img := grayJPEG(t)
	r = d.call(n, "put-reference-image.request", "put-reference-image.200", "PUT", A+"/tasks/"+taskA+"/reference-image", adm,
		hdrs{{"Content-Type", "image/jpeg"}, {"Idempotency-Key", nodetest.NewKey()}}, img)
	nodetest.Must(t, r, 200)
	r = d.json(n, "amend.request", "amend.200", "POST", A+"/tasks/"+taskA+"/amend", adm, nil,
		map[string]any{"expected_revision": 2, "payload": map[string]any{"action": "open_url", "url": "https://example.com/b"}})
	nodetest.Must(t, r, 200)
	r = d.json(n, "authorize.request", "authorize.200", "POST", A+"/tasks/"+taskA+"/authorize", adm, nil,
		map[string]any{"expected_revision": 3, "ttl_seconds": 3600, "takeover": "reclaim"})
	nodetest.Must(t, r, 200)
	d.json(n, "", "error.422", "POST", A+"/tasks", adm, nil,
		map[string]any{"payload": map[string]any{"n": 1}, "authorize": map[string]any{"ttl_seconds": 60}})

	// The device claims it and runs it to the end.
	session := uuid.NewString()
	tok := nodetest.NewClaimToken()
	claimKey := nodetest.NewKey()
	claim := func(reqName, ansName, key, token, sess string) *nodetest.Resp {
		h := hdrs{{"Idempotency-Key", key}}
		if token != "" {
			h = append(h, [2]string{"X-Claim-Token", token})
		}
		return d.json(n, reqName, ansName, "POST", D+"/tasks/claim-next", devTok, h,
			map[string]any{"device_id": devID, "session_id": sess})
	}
	r = claim("claim-next.request", "claim-next.200", claimKey, tok, session)
	nodetest.Must(t, r, 200)
	lease := nodetest.Str(r.JSON(), "lease_expires_at")
	claim("", "claim-next.replay", claimKey, tok, session)
	d.json(n, "", "error.409", "POST", D+"/tasks/claim-next", devTok, hdrs{{"Idempotency-Key", claimKey}, {"X-Claim-Token", tok}},
		map[string]any{"device_id": devID, "session_id": uuid.NewString()})
	task := func(reqName, ansName, id, op, token string, body map[string]any) *nodetest.Resp {
		body["device_id"] = devID
		return d.json(n, reqName, ansName, "POST", D+"/tasks/"+id+"/"+op, devTok, hdrs{{"X-Claim-Token", token}}, body)
	}
	d.call(n, "device-reference-image.request", "device-reference-image.200", "GET", D+"/tasks/"+taskA+"/reference-image", devTok,
		hdrs{{"X-Claim-Token", tok}, {"X-Claim-Generation", "1"}}, nil)
	n.Advance(time.Minute)
	r = task("renew.request", "renew.200", taskA, "lease/renew", tok, map[string]any{"claim_generation": 1,
		"session_id": session, "expected_lease_expires_at": lease})
	nodetest.Must(t, r, 200)
	r = task("start.request", "start.200", taskA, "start", tok, map[string]any{"claim_generation": 1, "expected_version": nodetest.Num(r.JSON(), "version")})
	nodetest.Must(t, r, 200)
	exec := nodetest.Str(r.JSON(), "execution_id")
	r = task("heartbeat.request", "heartbeat.200", taskA, "heartbeat", tok, map[string]any{"claim_generation": 1,
		"execution_id": exec, "step": "page_loaded", "client_time": "2026-12-01T09:01:00.500Z"})
	nodetest.Must(t, r, 200)
	vA := nodetest.Num(r.JSON(), "version")
	r = d.call(n, "evidence.request", "evidence.201", "POST", D+"/tasks/"+taskA+"/evidence", devTok, hdrs{
		{"Content-Type", "image/png"}, {"Idempotency-Key", nodetest.NewKey()}, {"X-Claim-Token", tok},
		{"X-Claim-Generation", "1"}, {"X-Execution-Id", exec}, {"X-Evidence-Kind", "screenshot"},
		{"X-Captured-At", "2026-12-01T09:01:00.750Z"}}, grayPNG(t))
	nodetest.Must(t, r, 201)
	evID := nodetest.Str(r.JSON(), "evidence_id")
	r = task("await-confirmation.request", "await-confirmation.200", taskA, "await-confirmation", tok,
		map[string]any{"claim_generation": 1, "execution_id": exec, "expected_version": vA, "reason": "confirm the payment dialog"})
	nodetest.Must(t, r, 200)
	r = task("resume.request", "resume.200", taskA, "resume", tok, map[string]any{"claim_generation": 1, "execution_id": exec,
		"expected_version": nodetest.Num(r.JSON(), "version")})
	nodetest.Must(t, r, 200)
	r = task("complete.request", "complete.200", taskA, "complete", tok, map[string]any{"claim_generation": 1,
		"execution_id": exec, "expected_version": nodetest.Num(r.JSON(), "version"), "result": map[string]any{"status": "done", "items": 3}})
	nodetest.Must(t, r, 200)
	task("", "error.404-claim", taskA, "heartbeat", tok, map[string]any{"claim_generation": 1, "execution_id": exec,
		"step": "late"})

	// The operator reads it back.
	d.call(n, "get-task.request", "get-task.200", "GET", A+"/tasks/"+taskA, adm, nil, nil)
	d.call(n, "task-events.request", "task-events.200", "GET", A+"/tasks/"+taskA+"/events", adm, nil, nil)
	d.call(n, "get-evidence.request", "get-evidence.200", "GET", A+"/tasks/"+taskA+"/evidence/"+evID, adm, nil, nil)
	d.call(n, "get-reference-image.request", "get-reference-image.200", "GET", A+"/tasks/"+taskA+"/reference-image", adm, nil, nil)
	d.call(n, "provenance.request", "provenance.200", "GET", A+"/tasks/"+taskA+"/provenance", adm, nil, nil)

	// A second task: claimed with a server-issued token, released,
	// claimed again, started, canceled by the operator, acknowledged.
	r = d.json(n, "create-task-authorized.request", "", "POST", A+"/tasks", adm, nil,
		map[string]any{"payload": map[string]any{"action": "sync"}, "authorize": map[string]any{"ttl_seconds": 3600}})
	nodetest.Must(t, r, 201)
	taskB := nodetest.Str(r.JSON(), "id")
	r = claim("claim-next-server-token.request", "claim-next-server-token.200", nodetest.NewKey(), "", session)
	nodetest.Must(t, r, 200)
	stok := nodetest.Str(r.JSON()["claim"].(map[string]any), "token")
	r = task("release.request", "release.200", taskB, "release", stok, map[string]any{"claim_generation": 1, "expected_version": nodetest.Num(r.JSON(), "version")})
	nodetest.Must(t, r, 200)
	tok2 := nodetest.NewClaimToken()
	r = claim("", "", nodetest.NewKey(), tok2, session)
	nodetest.Must(t, r, 200)
	r = task("", "", taskB, "start", tok2, map[string]any{"claim_generation": 2, "expected_version": nodetest.Num(r.JSON(), "version")})
	nodetest.Must(t, r, 200)
	execB := nodetest.Str(r.JSON(), "execution_id")
	r = d.json(n, "cancel.request", "cancel.200", "POST", A+"/tasks/"+taskB+"/cancel", adm, nil,
		map[string]any{"reason": "superseded by a newer task", "expected_version": nodetest.Num(r.JSON(), "version")})
	nodetest.Must(t, r, 200)
	r = task("cancel-ack.request", "cancel-ack.200", taskB, "cancel-ack", tok2, map[string]any{"claim_generation": 2,
		"execution_id": execB, "expected_version": nodetest.Num(r.JSON(), "version")})
	nodetest.Must(t, r, 200)

	// A third task fails.
	nodetest.Must(t, d.json(n, "", "", "POST", A+"/tasks", adm, nil,
		map[string]any{"payload": map[string]any{"action": "scan"}, "authorize": map[string]any{"ttl_seconds": 3600}}), 201)
	tok3 := nodetest.NewClaimToken()
	r = claim("", "", nodetest.NewKey(), tok3, session)
	nodetest.Must(t, r, 200)
	taskC := nodetest.Str(r.JSON()["task"].(map[string]any), "id")
	r = task("", "", taskC, "start", tok3, map[string]any{"claim_generation": 1, "expected_version": nodetest.Num(r.JSON(), "version")})
	nodetest.Must(t, r, 200)
	r = task("fail.request", "fail.200", taskC, "fail", tok3, map[string]any{"claim_generation": 1,
		"execution_id": nodetest.Str(r.JSON(), "execution_id"), "expected_version": nodetest.Num(r.JSON(), "version"), "reason_code": "target_app_crashed",
		"detail": "the app closed while loading"})
	nodetest.Must(t, r, 200)
	claim("", "claim-next.204", nodetest.NewKey(), nodetest.NewClaimToken(), session)

	// A fourth task loses its authorization.
	r = d.json(n, "", "", "POST", A+"/tasks", adm, nil,
		map[string]any{"payload": map[string]any{"action": "noop"}, "authorize": map[string]any{"ttl_seconds": 3600}})
	nodetest.Must(t, r, 201)
	taskD := nodetest.Str(r.JSON(), "id")
	r = d.json(n, "revoke-authorization.request", "revoke-authorization.200", "POST", A+"/tasks/"+taskD+"/authorization/revoke", adm, nil,
		map[string]any{"reason": "wrong account"})
	nodetest.Must(t, r, 200)
	d.call(n, "list-tasks.request", "list-tasks.200", "GET", A+"/tasks?state=PENDING&limit=1", adm, nil, nil)

	// A fifth task: its device goes silent, the operator recovers it.
	r = d.json(n, "", "", "POST", A+"/tasks", adm, nil,
		map[string]any{"payload": map[string]any{"action": "upload"}, "authorize": map[string]any{"ttl_seconds": 3600}})
	nodetest.Must(t, r, 201)
	taskE := nodetest.Str(r.JSON(), "id")
	reg2 := d.json(n, "", "", "POST", A+"/devices", adm, nil, map[string]any{"owner_id": owner, "name": "pixel-7-lab-4"})
	nodetest.Must(t, reg2, 201)
	dev2ID, dev2Tok := nodetest.Str(reg2.JSON(), "device_id"), nodetest.Str(reg2.JSON(), "token")
	d.names[dev2Tok] = "<device token>"
	nodetest.Must(t, d.json(n, "", "", "POST", D+"/heartbeat", dev2Tok, nil, presence(dev2ID)), 200)
	tok5 := nodetest.NewClaimToken()
	r = d.json(n, "", "", "POST", D+"/tasks/claim-next", dev2Tok, hdrs{{"X-Claim-Token", tok5}},
		map[string]any{"device_id": dev2ID, "session_id": uuid.NewString()})
	nodetest.Must(t, r, 200)
	r = d.json(n, "", "", "POST", D+"/tasks/"+taskE+"/start", dev2Tok, hdrs{{"X-Claim-Token", tok5}},
		map[string]any{"device_id": dev2ID, "claim_generation": 1, "expected_version": nodetest.Num(r.JSON(), "version")})
	nodetest.Must(t, r, 200)
	execE, verE := nodetest.Str(r.JSON(), "execution_id"), nodetest.Num(r.JSON(), "version")
	r = d.json(n, "advance-clock.request", "advance-clock.200", "POST", A+"/test-clock/advance", adm, nil,
		map[string]any{"seconds": 120})
	nodetest.Must(t, r, 200)
	d.json(n, "", "error.409-lease", "POST", D+"/tasks/"+taskE+"/heartbeat", dev2Tok, hdrs{{"X-Claim-Token", tok5}},
		map[string]any{"device_id": dev2ID, "claim_generation": 1, "execution_id": execE, "step": "uploading"})
	d.json(n, "", "claim-next.409", "POST", D+"/tasks/claim-next", devTok, hdrs{{"X-Claim-Token", nodetest.NewClaimToken()}},
		map[string]any{"device_id": devID, "session_id": session})
	r = d.json(n, "recover.request", "recover.200", "POST", A+"/tasks/"+taskE+"/recover", adm, nil,
		map[string]any{"decision": "fail", "reason": "device lost power", "expected_version": verE})
	nodetest.Must(t, r, 200)
	r = d.json(n, "revoke-device.request", "revoke-device.200", "POST", A+"/devices/"+dev2ID+"/revoke", adm, nil,
		map[string]any{"reason": "device retired"})
	nodetest.Must(t, r, 200)

	// The log, its checkpoints and proofs.
	d.call(n, "events.request", "events.200", "GET", A+"/events?after=0&limit=2", adm, nil, nil)
	head := n.Head()
	d.stream(n, "event-stream.request", "event-stream.200", fmt.Sprintf("%s/events/stream?after=%d", A, head-2), nil, 2)
	if _, err := n.Transparency.Sign(); err != nil {
		t.Fatal(err)
	}
	d.call(n, "checkpoint.request", "checkpoint.200", "GET", "/api/v1/checkpoint", "", nil, nil)
	d.call(n, "inclusion-proof.request", "inclusion-proof.200", "GET", A+"/proofs/inclusion?seq=3", adm, nil, nil)
	d.call(n, "consistency-proof.request", "consistency-proof.200", "GET", fmt.Sprintf("%s/proofs/consistency?from=3&to=%d", A, head), adm, nil, nil)
	d.call(n, "audit-bundle.request", "audit-bundle.200", "GET", A+"/tasks/"+taskA+"/audit-bundle", adm, nil, nil)

	// Admin tokens of the running server, and the raw log.
	r = d.json(n, "create-admin-token.request", "create-admin-token.201", "POST", A+"/admin-tokens", adm, nil,
		map[string]any{"name": "ci-runner"})
	nodetest.Must(t, r, 201)
	d.names[nodetest.Str(r.JSON(), "token")] = "<admin token>"
	d.call(n, "list-admin-tokens.request", "list-admin-tokens.200", "GET", A+"/admin-tokens", adm, nil, nil)
	d.call(n, "get-admin-token.request", "get-admin-token.200", "GET", A+"/admin-tokens/ci-runner", adm, nil, nil)
	r = d.json(n, "revoke-admin-token.request", "revoke-admin-token.200", "POST", A+"/admin-tokens/ci-runner/revoke", adm, nil,
		map[string]any{"reason": "runner decommissioned"})
	nodetest.Must(t, r, 200)
	d.call(n, "raw-log.request", "raw-log.200", "GET", A+"/log?after=0&limit=2", adm, nil, nil)

	// The general refusals.
	d.json(n, "", "error.401", "POST", D+"/heartbeat", "", nil, presence(devID))
	d.call(n, "", "error.403", "GET", A+"/tasks", devTok, nil, nil)
	d.json(n, "error.400.request", "error.400", "POST", A+"/tasks", adm, nil, map[string]any{"payload": map[string]any{}, "priority": 1})
	d.call(n, "", "error.400-key", "POST", A+"/tasks", adm, hdrs{{"Content-Type", "application/json"}}, []byte(`{"payload":{}}`))
	d.call(n, "", "error.404", "GET", "/api/v1/admin/nothing-here", adm, nil, nil)
	d.call(n, "", "error.405", "DELETE", A+"/tasks", adm, nil, nil)
	d.call(n, "", "error.413", "POST", D+"/heartbeat", devTok, hdrs{{"Content-Type", "application/json"}}, bytes.Repeat([]byte(" "), 5000))
	d.call(n, "", "error.415", "POST", A+"/tasks", adm, hdrs{{"Content-Type", "text/plain"}, {"Idempotency-Key", nodetest.NewKey()}}, []byte("x"))
	d.call(n, "", "error.ambiguous", "GET", A+"/tasks?limit=1&limit=2", adm, nil, nil)
	d.call(n, "metrics.request", "metrics.200", "GET", "/metrics", "", nil, nil)

	// Rate limits (their own node: limits are set before the first request).
	rl := nodetest.Start(t, clock)
	rl.API.SetLimits(api.Limits{AddressRate: 1.0 / 60, AddressBurst: 1, Now: func() time.Time { return docStart }})
	d.call(rl, "", "", "GET", A+"/tasks", "", nil, nil)
	d.call(rl, "", "error.429", "GET", A+"/tasks", "", nil, nil)
	return d.ex
}

func TestAPIDocExamplesAreLive(t *testing.T) {
	live := liveExamples(t)
	raw, err := os.ReadFile(apiDocPath)
	if err != nil {
		t.Fatal(err)
	}
	doc := string(raw)
	if *updateAPIDoc {
		seen := map[string]bool{}
		doc = exampleBlock.ReplaceAllStringFunc(doc, func(m string) string {
			name := exampleBlock.FindStringSubmatch(m)[1]
			text, ok := live[name]
			if !ok {
				return m
			}
			seen[name] = true
			return "<!-- example: " + name + " -->\n```http\n" + text + "```"
		})
		if err := os.WriteFile(apiDocPath, []byte(doc), 0o644); err != nil {
			t.Fatal(err)
		}
		for name := range live {
			if !seen[name] {
				t.Errorf("docs/api.md has no marker for the live example %q", name)
			}
		}
		return
	}
	problems := compareDoc(doc, live)
	for _, p := range problems {
		t.Error(p)
	}
	if len(problems) > 0 {
		t.Log("regenerate with: go test ./api -run TestAPIDocExamplesAreLive -update")
	}
}

// compareDoc lists where the doc's examples differ from the live ones.
func compareDoc(doc string, live map[string]string) []string {
	var out []string
	inDoc := map[string]bool{}
	for _, m := range exampleBlock.FindAllStringSubmatch(doc, -1) {
		name, text := m[1], m[2]
		if inDoc[name] {
			out = append(out, fmt.Sprintf("example %q appears twice", name))
		}
		inDoc[name] = true
		want, ok := live[name]
		if !ok {
			out = append(out, fmt.Sprintf("example %q: no live exchange of that name", name))
			continue
		}
		if err := sameShape(text, want); err != nil {
			out = append(out, fmt.Sprintf("example %q is stale: %v", name, err))
		}
	}
	var missing []string
	for name := range live {
		if !inDoc[name] {
			missing = append(missing, name)
		}
	}
	sort.Strings(missing)
	for _, name := range missing {
		out = append(out, fmt.Sprintf("live example %q has no marked block in docs/api.md", name))
	}
	return out
}

var (
	reUUID   = regexp.MustCompile(`[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}`)
	reTime   = regexp.MustCompile(`\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(\.\d+)?Z`)
	reHex64  = regexp.MustCompile(`\b[0-9a-f]{16,}\b`)
	reBase64 = regexp.MustCompile(`[A-Za-z0-9+/_-]{40,}={0,2}`)
	reDigits = regexp.MustCompile(`\d+`)
)

// normIDs replaces what differs between runs (ids, times, hashes, tokens).
func normIDs(s string) string {
	s = reUUID.ReplaceAllString(s, "<uuid>")
	s = reTime.ReplaceAllString(s, "<time>")
	s = reHex64.ReplaceAllString(s, "<hex>")
	return reBase64.ReplaceAllString(s, "<b64>")
}

// split parses a rendered exchange: first line, headers, body.
func split(text string) (string, []string, string) {
	head, body, _ := strings.Cut(text, "\n\n")
	lines := strings.Split(strings.TrimRight(head, "\n"), "\n")
	return lines[0], lines[1:], body
}

func sameShape(got, want string) error {
	g1, gh, gb := split(got)
	w1, wh, wb := split(want)
	if normIDs(g1) != normIDs(w1) {
		return fmt.Errorf("first line %q, live %q", g1, w1)
	}
	if a, b := normIDs(strings.Join(gh, "\n")), normIDs(strings.Join(wh, "\n")); a != b {
		return fmt.Errorf("headers\n%s\nlive\n%s", a, b)
	}
	gb, wb = strings.TrimSpace(gb), strings.TrimSpace(wb)
	switch {
	case strings.HasPrefix(wb, "{") || strings.HasPrefix(wb, "["):
		var gv, wv any
		if err := json.Unmarshal([]byte(gb), &gv); err != nil {
			return fmt.Errorf("body is not JSON: %v", err)
		}
		if err := json.Unmarshal([]byte(wb), &wv); err != nil {
			return fmt.Errorf("live body is not JSON: %v", err)
		}
		return jsonShape("body", gv, wv)
	default:
		gl, wl := strings.Split(gb, "\n"), strings.Split(wb, "\n")
		if len(gl) != len(wl) {
			return fmt.Errorf("body has %d lines, live %d", len(gl), len(wl))
		}
		for i := range gl {
			if strings.HasPrefix(wl[i], "data: {") {
				var gv, wv any
				if err := json.Unmarshal([]byte(strings.TrimPrefix(gl[i], "data: ")), &gv); err != nil {
					return fmt.Errorf("body line %d: %v", i+1, err)
				}
				_ = json.Unmarshal([]byte(strings.TrimPrefix(wl[i], "data: ")), &wv)
				if err := jsonShape(fmt.Sprintf("line %d", i+1), gv, wv); err != nil {
					return err
				}
				continue
			}
			if a, b := reDigits.ReplaceAllString(normIDs(gl[i]), "N"), reDigits.ReplaceAllString(normIDs(wl[i]), "N"); a != b {
				return fmt.Errorf("body line %d %q, live %q", i+1, gl[i], wl[i])
			}
		}
	}
	return nil
}

// jsonShape compares two JSON values: the same keys, the same JSON types,
// arrays of the same length, at every depth.
func jsonShape(at string, got, want any) error {
	if kind(got) != kind(want) {
		return fmt.Errorf("%s is %s, live %s", at, kind(got), kind(want))
	}
	switch w := want.(type) {
	case map[string]any:
		g := got.(map[string]any)
		for k := range w {
			if _, ok := g[k]; !ok {
				return fmt.Errorf("%s lacks %q", at, k)
			}
		}
		for k := range g {
			if _, ok := w[k]; !ok {
				return fmt.Errorf("%s has %q, which the live answer has not", at, k)
			}
			if err := jsonShape(at+"."+k, g[k], w[k]); err != nil {
				return err
			}
		}
	case []any:
		g := got.([]any)
		if len(g) != len(w) {
			return fmt.Errorf("%s has %d items, live %d", at, len(g), len(w))
		}
		for i := range w {
			if err := jsonShape(fmt.Sprintf("%s[%d]", at, i), g[i], w[i]); err != nil {
				return err
			}
		}
	}
	return nil
}

func kind(v any) string {
	switch v.(type) {
	case nil:
		return "null"
	case bool:
		return "boolean"
	case float64:
		return "number"
	case string:
		return "string"
	case []any:
		return "array"
	case map[string]any:
		return "object"
	}
	return fmt.Sprintf("%T", v)
}

// TestAPIDocShapeCheckFails proves the comparison can fail: a field added,
// removed or retyped, a status or header changed, a marker missing.
func TestAPIDocShapeCheckFails(t *testing.T) {
	live := "HTTP/1.1 200 OK\nContent-Type: application/json\n\n{\n  \"a\": 1,\n  \"b\": [\"x\"],\n  \"c\": null\n}\n"
	if err := sameShape(strings.Replace(live, "1,", "2,", 1), live); err != nil {
		t.Fatalf("another value of the same type must pass: %v", err)
	}
	for name, doc := range map[string]string{
		"field removed": strings.Replace(live, "\"c\": null", "\"d\": null", 1),
		"field retyped": strings.Replace(live, "\"c\": null", "\"c\": \"now\"", 1),
		"array length":  strings.Replace(live, "[\"x\"]", "[]", 1),
		"status":        strings.Replace(live, "200 OK", "201 Created", 1),
		"header":        strings.Replace(live, "Content-Type: application/json\n", "", 1),
		"header value":  strings.Replace(live, "application/json", "text/plain", 1),
		"not JSON":      strings.Replace(live, "{\n", "", 1),
	} {
		if err := sameShape(doc, live); err == nil {
			t.Errorf("%s: the stale example passed", name)
		}
	}
	marked := func(name, text string) string { return "<!-- example: " + name + " -->\n```http\n" + text + "```\n" }
	if p := compareDoc(marked("x.200", live), map[string]string{"x.200": live, "y.200": live}); len(p) != 1 ||
		!strings.Contains(p[0], "y.200") {
		t.Errorf("a live example without a marker: %v", p)
	}
	if p := compareDoc(marked("x.200", live)+marked("z.200", live), map[string]string{"x.200": live}); len(p) != 1 ||
		!strings.Contains(p[0], "z.200") {
		t.Errorf("a marker without a live example: %v", p)
	}
}
