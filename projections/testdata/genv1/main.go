// Command genv1 writes the fixture log of projections/testdata/v1: a small
// ledger written by the real server (in process, manual clock) that uses
// every event type, so later code proves it still replays and verifies
// logs written with the first event schemas.
//
// It was run once, at commit 9777854, before any event type had a second
// schema (task.heartbeat schema 2 came in the next commit):
//
//	go run ./projections/testdata/genv1 -out projections/testdata/v1
//
// To reproduce the fixture, check out that commit and run the line above.
// Running it on later code writes a log with the newer schemas, which is
// not the point of the fixture: the committed files are the frozen format.
// The claim-token secret below is a test value.
package main

import (
	"bytes"
	"encoding/json"
	"flag"
	"fmt"
	"image"
	"image/color"
	"image/jpeg"
	"image/png"
	"io"
	"log"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/google/uuid"
	"github.com/rs/zerolog"

	"taskledger/commands"
	"taskledger/events"
	"taskledger/ledger"
	"taskledger/node"
	"taskledger/projections"
)

// Secret is the fixture's claim-token secret (64 hex).
const Secret = "5eed5eed5eed5eed5eed5eed5eed5eed5eed5eed5eed5eed5eed5eed5eed5eed"

type client struct {
	url, admin string
	h          *http.Client
}

type resp struct {
	status int
	body   map[string]any
}

func (c *client) do(method, path, token, ctype string, body []byte, headers map[string]string) resp {
	req, err := http.NewRequest(method, c.url+path, bytes.NewReader(body))
	if err != nil {
		log.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer "+token)
	if body != nil {
		req.Header.Set("Content-Type", ctype)
	}
	if method == "POST" || method == "PUT" {
		req.Header.Set("Idempotency-Key", uuid.NewString())
	}
	for k, v := range headers {
		req.Header.Set(k, v)
	}
	res, err := c.h.Do(req)
	if err != nil {
		log.Fatal(err)
	}
	defer res.Body.Close()
	raw, _ := io.ReadAll(res.Body)
	var m map[string]any
	_ = json.Unmarshal(raw, &m)
	return resp{status: res.StatusCode, body: m}
}

func (c *client) json(method, path, token string, body map[string]any, headers map[string]string, want int) map[string]any {
	raw, _ := json.Marshal(body)
	r := c.do(method, path, token, "application/json", raw, headers)
	if r.status != want {
		log.Fatalf("%s %s: got %d %v, want %d", method, path, r.status, r.body, want)
	}
	return r.body
}

type device struct {
	c                    *client
	id, token, session   string
	claimTok, task, exec string
	gen                  float64
	version              float64
}

func (c *client) register(checks []string) *device {
	body := map[string]any{"owner_id": uuid.NewString(), "name": "fixture device"}
	if checks != nil {
		body["required_checks"] = checks
	}
	m := c.json("POST", "/api/v1/admin/devices", c.admin, body, nil, 201)
	return &device{c: c, id: m["device_id"].(string), token: m["token"].(string), session: uuid.NewString()}
}

func (d *device) ready() {
	d.c.json("POST", "/api/v1/device/heartbeat", d.token, map[string]any{"device_id": d.id, "app_version": "1.0.0",
		"os_version": "Android 14", "target_app_version": "7.1.0",
		"checks": map[string]bool{"accessibility_connected": true, "target_app_installed": true}}, nil, 200)
}

// claim claims with a client-issued token, or a server-issued one when
// token is "".
func (d *device) claim(token string, want int) map[string]any {
	h := map[string]string{}
	if token != "" {
		h["X-Claim-Token"] = token
	}
	m := d.c.json("POST", "/api/v1/device/tasks/claim-next", d.token, map[string]any{"device_id": d.id,
		"session_id": d.session}, h, want)
	if want == 200 {
		cl := m["claim"].(map[string]any)
		d.task, d.gen, d.version = m["task"].(map[string]any)["id"].(string), m["claim_generation"].(float64), m["version"].(float64)
		d.claimTok = token
		if token == "" {
			d.claimTok = cl["token"].(string)
		}
	}
	return m
}

func (d *device) call(op string, body map[string]any, want int) map[string]any {
	body["device_id"], body["claim_generation"] = d.id, d.gen
	m := d.c.json("POST", "/api/v1/device/tasks/"+d.task+"/"+op, d.token, body,
		map[string]string{"X-Claim-Token": d.claimTok}, want)
	if v, ok := m["version"].(float64); ok {
		d.version = v
	}
	if e, ok := m["execution_id"].(string); ok && e != "" {
		d.exec = e
	}
	return m
}

func (c *client) createTask(payload map[string]any) string {
	m := c.json("POST", "/api/v1/admin/tasks", c.admin, map[string]any{"payload": payload,
		"authorize": map[string]any{"ttl_seconds": 7200}}, nil, 201)
	return m["id"].(string)
}

func (c *client) advance(seconds int) {
	c.json("POST", "/api/v1/admin/test-clock/advance", c.admin, map[string]any{"seconds": seconds}, nil, 200)
}

func tinyPNG() []byte {
	img := image.NewRGBA(image.Rect(0, 0, 2, 2))
	img.Set(0, 0, color.RGBA{R: 255, A: 255})
	var b bytes.Buffer
	_ = png.Encode(&b, img)
	return b.Bytes()
}

func tinyJPEG() []byte {
	img := image.NewRGBA(image.Rect(0, 0, 8, 8))
	var b bytes.Buffer
	_ = jpeg.Encode(&b, img, nil)
	return b.Bytes()
}

func main() {
	out := flag.String("out", "projections/testdata/v1", "output directory (replaced)")
	flag.Parse()
	if err := os.RemoveAll(*out); err != nil {
		log.Fatal(err)
	}
	cfg := commands.DefaultConfig()
	cfg.ClaimSecret = []byte(strings.Repeat("\x5e\xed", 16))
	if fmt.Sprintf("%x", cfg.ClaimSecret) != Secret {
		log.Fatal("secret constant mismatch")
	}
	start := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	n, err := node.Open(node.Config{DataDir: *out, Manual: true, Commands: cfg, SnapshotEvery: 100000,
		Logger: zerolog.Nop(), Clock: fixedClock(start)})
	if err != nil {
		log.Fatal(err)
	}
	tok, _ := os.ReadFile(filepath.Join(*out, node.InitialTokenFile))
	srv := httptest.NewServer(n.API.Handler())
	c := &client{url: srv.URL, admin: strings.TrimSpace(string(tok)), h: srv.Client()}

	a := c.register(nil)
	b := c.register([]string{})
	a.ready()
	b.ready()
	t1 := c.createTask(map[string]any{"job": "one", "steps": []int{1, 2}})
	t2 := c.createTask(map[string]any{"job": "two"})
	t3 := c.createTask(map[string]any{"job": "three"})

	// t1: client token; renew, start, heartbeats, confirmation, evidence, complete.
	a.claim(apptestToken(1), 200)
	a.claim(apptestToken(1), 200) // same session, same token: task.claim_resumed
	a.call("lease/renew", map[string]any{"session_id": a.session,
		"expected_lease_expires_at": a.c.json("GET", "/api/v1/admin/tasks/"+t1, c.admin, nil, nil, 200)["claim"].(map[string]any)["lease_expires_at"]}, 200)
	a.call("start", map[string]any{"expected_version": a.version}, 200)
	c.advance(10)
	a.call("heartbeat", map[string]any{"execution_id": a.exec, "step": "open-app", "client_time": "2026-01-02T03:04:14.500Z"}, 200)
	a.call("await-confirmation", map[string]any{"execution_id": a.exec, "expected_version": a.version, "reason": "confirm the order"}, 200)
	a.call("heartbeat", map[string]any{"execution_id": a.exec, "step": "waiting"}, 200)
	a.call("resume", map[string]any{"execution_id": a.exec, "expected_version": a.version}, 200)
	ev := c.do("POST", "/api/v1/device/tasks/"+t1+"/evidence", a.token, "image/png", tinyPNG(), map[string]string{
		"X-Claim-Token": a.claimTok, "X-Claim-Generation": fmt.Sprint(a.gen), "X-Execution-Id": a.exec,
		"X-Evidence-Kind": "screenshot", "X-Captured-At": "2026-01-02T03:04:15.000Z"})
	if ev.status != 201 {
		log.Fatalf("evidence: %d %v", ev.status, ev.body)
	}
	a.call("complete", map[string]any{"execution_id": a.exec, "expected_version": a.version, "result": map[string]any{"ok": true}}, 200)

	// t2: server-issued token; a second session asks while it runs; fail.
	a.claim("", 200)
	a.call("start", map[string]any{"expected_version": a.version}, 200)
	other := *a
	other.session = uuid.NewString()
	other.claim(apptestToken(2), 409) // claim_requires_manual (recorded)
	a.call("heartbeat", map[string]any{"execution_id": a.exec, "step": "typing"}, 200)
	a.call("fail", map[string]any{"execution_id": a.exec, "expected_version": a.version, "reason_code": "target_app_crashed", "detail": "crash"}, 200)

	// t3: b claims and releases, claims again, starts, and its running lease
	// expires: late report, then the operator recovers it as failed.
	b.claim(apptestToken(3), 200)
	b.call("release", map[string]any{"expected_version": b.version}, 200)
	b.claim(apptestToken(4), 200)
	b.call("start", map[string]any{"expected_version": b.version}, 200)
	b.call("heartbeat", map[string]any{"execution_id": b.exec, "step": "step-1"}, 200)
	c.advance(600)
	b.call("complete", map[string]any{"execution_id": b.exec, "expected_version": b.version, "result": map[string]any{"late": true}}, 409)
	c.json("POST", "/api/v1/admin/tasks/"+t3+"/recover", c.admin, map[string]any{"decision": "fail", "reason": "lease expired",
		"expected_version": b.version}, nil, 200)

	// t4: amended, reference image, authorized, revoked, authorized again;
	// claimed and left to expire; an amendment closes the stale claim; then
	// authorized and canceled by the operator.
	t4 := c.createTask(map[string]any{"job": "four"})
	c.json("POST", "/api/v1/admin/tasks/"+t4+"/amend", c.admin, map[string]any{"expected_revision": 1, "payload": map[string]any{"job": "four", "v": 2}}, nil, 200)
	r := c.do("PUT", "/api/v1/admin/tasks/"+t4+"/reference-image", c.admin, "image/jpeg", tinyJPEG(), nil)
	if r.status != 200 {
		log.Fatalf("reference image: %d %v", r.status, r.body)
	}
	c.json("POST", "/api/v1/admin/tasks/"+t4+"/authorize", c.admin, map[string]any{"expected_revision": 3, "ttl_seconds": 3600}, nil, 200)
	c.json("POST", "/api/v1/admin/tasks/"+t4+"/authorization/revoke", c.admin, map[string]any{"reason": "changed my mind"}, nil, 200)
	c.json("POST", "/api/v1/admin/tasks/"+t4+"/authorize", c.admin, map[string]any{"expected_revision": 3, "ttl_seconds": 3600}, nil, 200)
	a.ready()
	b.ready()
	a.claim(apptestToken(5), 200)
	c.advance(660)
	c.json("POST", "/api/v1/admin/tasks/"+t4+"/amend", c.admin, map[string]any{"expected_revision": 3, "payload": map[string]any{"job": "four", "v": 3}}, nil, 200)
	c.json("POST", "/api/v1/admin/tasks/"+t4+"/authorize", c.admin, map[string]any{"expected_revision": 4, "ttl_seconds": 3600}, nil, 200)
	c.json("POST", "/api/v1/admin/tasks/"+t4+"/cancel", c.admin, map[string]any{"reason": "not needed"}, nil, 200)
	a.ready()
	b.ready()

	// t5: running, cancel requested, device acknowledges.
	t5 := c.createTask(map[string]any{"job": "five"})
	b.claim(apptestToken(6), 200)
	b.call("start", map[string]any{"expected_version": b.version}, 200)
	c.json("POST", "/api/v1/admin/tasks/"+t5+"/cancel", c.admin, map[string]any{"reason": "stop please"}, nil, 200)
	b.call("cancel-ack", map[string]any{"execution_id": b.exec, "expected_version": b.version}, 200)

	// t6: claimed by a, whose device is then revoked; recovered to requeue.
	t6 := c.createTask(map[string]any{"job": "six"})
	a.claim(apptestToken(7), 200)
	c.json("POST", "/api/v1/admin/devices/"+a.id+"/revoke", c.admin, map[string]any{"reason": "lost phone"}, nil, 200)
	c.json("POST", "/api/v1/admin/tasks/"+t6+"/recover", c.admin, map[string]any{"decision": "requeue", "reason": "device revoked",
		"expected_version": a.version}, nil, 200)
	_ = t2

	srv.Close()
	var head uint64
	n.Engine.Read(func(s *projections.State) { head = s.Head.Seq })
	if err := n.Close(); err != nil {
		log.Fatal(err)
	}
	os.Remove(filepath.Join(*out, node.InitialTokenFile))
	if err := writeGolden(*out); err != nil {
		log.Fatal(err)
	}
	fmt.Printf("wrote %s: %d events\n", *out, head)
}

// GoldenFile holds the stored bytes of the log's first task.heartbeat
// envelope (msgpack, schema 1).
const GoldenFile = "heartbeat-schema1.envelope"

func writeGolden(dir string) error {
	store, err := ledger.Open(dir, ledger.Options{ReadOnly: true})
	if err != nil {
		return err
	}
	defer store.Close()
	var golden []byte
	err = store.RangeRaw(0, func(seq uint64, raw []byte) error {
		e, err := ledger.DecodeEvent(raw)
		if err != nil {
			return err
		}
		if e.Type == events.EvTaskHeartbeat {
			golden = append([]byte(nil), raw...)
			return ledger.ErrStop
		}
		return nil
	})
	if err != nil {
		return err
	}
	return os.WriteFile(filepath.Join(dir, GoldenFile), golden, 0o644)
}

// apptestToken is a fixed client-issued claim token (43 base64url chars).
func apptestToken(i int) string {
	return fmt.Sprintf("fixture-claim-token-%02d-", i) + strings.Repeat("A", 20)
}

type fixedClock time.Time

func (c fixedClock) Now() time.Time { return time.Time(c) }
