package api_test

import (
	"bytes"
	"encoding/binary"
	"hash/crc32"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"taskledger/node/nodetest"
)

// padPNG inserts a private ancillary chunk after IHDR so that a real PNG
// is exactly size bytes long.
func padPNG(t testing.TB, p []byte, size int) []byte {
	t.Helper()
	l := size - len(p) - 12
	if l < 0 {
		t.Fatalf("cannot pad %d bytes to %d", len(p), size)
	}
	chunk := make([]byte, 12+l)
	binary.BigEndian.PutUint32(chunk[0:4], uint32(l))
	copy(chunk[4:8], "prVt")
	binary.BigEndian.PutUint32(chunk[8+l:], crc32.ChecksumIEEE(chunk[4:8+l]))
	out := append([]byte{}, p[:33]...) // signature + IHDR
	out = append(out, chunk...)
	return append(out, p[33:]...)
}

// mustUploaded checks a 201 evidence answer against data.
func mustUploaded(t *testing.T, r *nodetest.Resp, data []byte) map[string]any {
	t.Helper()
	nodetest.Must(t, r, 201)
	m := r.JSON()
	if nodetest.Str(m, "sha256") != sha256Hex(data) || nodetest.Num(m, "size") != uint64(len(data)) ||
		nodetest.Str(m, "kind") != "screenshot" || nodetest.Str(m, "captured_at") != "2026-03-01T10:00:00.123Z" ||
		nodetest.Str(m, "evidence_id") == "" {
		t.Fatalf("evidence answer %s", r.Body)
	}
	return m
}

func TestEvidenceUpload(t *testing.T) {
	l := driveTo(t, stRunning)
	n := l.n
	data := tinyPNG(t)

	// Header and body validation comes first and appends nothing.
	refuse := func(status int, code string, body []byte, hdr map[string]string) {
		t.Helper()
		l.mustRefuse(t, status, code, func() *nodetest.Resp { return l.evidence(t, "", body, hdr) })
	}
	refuse(400, "invalid_png", tinyJPEG(t, 3), nil)
	refuse(400, "invalid_png", data[:20], nil)
	refuse(400, "invalid_png", []byte{}, nil)
	badCRC := append([]byte{}, data...)
	badCRC[30] ^= 0xff
	refuse(400, "invalid_png", badCRC, nil)
	badDepth := append([]byte{}, data...)
	badDepth[24] = 3 // bit depth 3 is not a PNG depth
	binary.BigEndian.PutUint32(badDepth[29:33], crc32.ChecksumIEEE(badDepth[12:29]))
	refuse(400, "invalid_png", badDepth, nil)
	refuse(413, "body_too_large", padPNG(t, data, 8<<20+1), nil)
	refuse(415, "unsupported_media_type", data, map[string]string{"Content-Type": "application/json"})
	refuse(400, "invalid_idempotency_key", data, map[string]string{"Idempotency-Key": ""})
	refuse(400, "invalid_claim_token", data, map[string]string{"X-Claim-Token": ""})
	refuse(400, "invalid_request", data, map[string]string{"X-Claim-Generation": "x"})
	refuse(400, "invalid_request", data, map[string]string{"X-Execution-Id": ""})
	refuse(400, "invalid_request", data, map[string]string{"X-Evidence-Kind": "photo"})
	refuse(400, "invalid_request", data, map[string]string{"X-Captured-At": "yesterday"})
	refuse(400, "invalid_request", data, map[string]string{"X-Captured-At": "2026-03-01T10:00:00.1234Z"})

	// A chunked body over the limit (no Content-Length) is refused too.
	req, _ := http.NewRequest("POST", n.URL+"/api/v1/device/tasks/"+l.id+"/evidence",
		io.MultiReader(bytes.NewReader(data), bytes.NewReader(make([]byte, 8<<20))))
	req.Header.Set("Authorization", "Bearer "+l.d.Token)
	for k, v := range l.evidenceHeaders("") {
		req.Header.Set(k, v)
	}
	head := n.Head()
	res, err := n.HTTP.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	raw, _ := io.ReadAll(res.Body)
	res.Body.Close()
	if res.StatusCode != 413 || !strings.Contains(string(raw), "body_too_large") || n.Head() != head {
		t.Fatalf("chunked oversize: %d %s", res.StatusCode, raw)
	}

	// State checks, in api.md's order.
	refuse(403, "claim_token_mismatch", data, map[string]string{"X-Claim-Token": nodetest.NewClaimToken()})
	refuse(409, "claim_generation_mismatch", data, map[string]string{"X-Claim-Generation": "2"})
	refuse(409, "execution_mismatch", data, map[string]string{"X-Execution-Id": nodetest.NewKey()})
	other := *l
	other.id = nodetest.NewKey()
	l.mustRefuse(t, 404, "claim_not_found", func() *nodetest.Resp { return other.evidence(t, "", data, nil) })

	// Exactly 8 MiB is accepted; a small one too.
	big := padPNG(t, data, 8<<20)
	mustUploaded(t, l.evidence(t, "", big, nil), big)
	key := nodetest.NewKey()
	first := l.evidence(t, key, data, nil)
	ev := mustUploaded(t, first, data)
	noStoragePath(t, n, first.Body)
	l.mustHoldNoSecret(t, first.Body)
	// The blob is a file named by its SHA-256, with the exact bytes.
	for _, b := range [][]byte{data, big} {
		stored, err := os.ReadFile(filepath.Join(n.Dir, "blobs", sha256Hex(b)))
		if err != nil || !bytes.Equal(stored, b) {
			t.Fatalf("blob %s: %v", sha256Hex(b), err)
		}
	}

	// The operator reads it back.
	get := n.Do("GET", "/api/v1/admin/tasks/"+l.id+"/evidence/"+nodetest.Str(ev, "evidence_id"), n.AdminToken, nil, nil)
	nodetest.Must(t, get, 200)
	if !bytes.Equal(get.Body, data) || get.Header.Get("Content-Type") != "image/png" {
		t.Fatalf("evidence read: %d bytes, %v", len(get.Body), get.Header)
	}
	nodetest.Must(t, n.Do("GET", "/api/v1/admin/tasks/"+l.id+"/evidence/"+nodetest.NewKey(), n.AdminToken, nil, nil), 404, "evidence_not_found")
	nodetest.Must(t, n.Do("GET", "/api/v1/device/tasks/"+l.id+"/evidence/"+nodetest.Str(ev, "evidence_id"), l.d.Token, nil, nil), 404)

	// The execution ends; the upload key still replays the same 201.
	l.must(t, "complete")
	head = n.Head()
	again := l.evidence(t, key, data, nil)
	nodetest.Must(t, again, 201)
	if !bytes.Equal(again.Body, first.Body) || again.Header.Get("Idempotent-Replayed") != "true" || n.Head() != head {
		t.Fatalf("replay after completion: %s %v", again.Body, again.Header)
	}
	// Same key, other bytes or other headers → conflict; a new key → not held.
	l.mustRefuse(t, 409, "idempotency_conflict", func() *nodetest.Resp { return l.evidence(t, key, big, nil) })
	l.mustRefuse(t, 409, "idempotency_conflict", func() *nodetest.Resp {
		return l.evidence(t, key, data, map[string]string{"X-Captured-At": "2026-03-01T10:00:01.000Z"})
	})

	l.mustRefuse(t, 404, "claim_not_found", func() *nodetest.Resp { return l.evidence(t, "", data, nil) })

	// The task detail lists both, and carries no token, hash or path.
	d := n.Do("GET", "/api/v1/admin/tasks/"+l.id, n.AdminToken, nil, nil)
	nodetest.Must(t, d, 200)
	list := d.JSON()["evidence"].([]any)
	if len(list) != 2 || nodetest.Str(list[1].(map[string]any), "evidence_id") != nodetest.Str(ev, "evidence_id") ||
		nodetest.Str(list[1].(map[string]any), "sha256") != sha256Hex(data) {
		t.Fatalf("evidence list %v", list)
	}
	l.mustHoldNoSecret(t, d.Body)
	noStoragePath(t, n, d.Body)
}

func TestEvidenceOwnership(t *testing.T) {
	n := nodetest.Start(t)
	cfg := n.Engine.Config()
	data := tinyPNG(t)
	a := newTaskLife(t, n)
	a.claim(t)
	// CLAIMED, not started: no execution to attach to.
	a.mustRefuse(t, 409, "invalid_state", func() *nodetest.Resp { return a.evidence(t, "", data, nil) })
	a.must(t, "start")

	// Another device, running its own task, cannot upload to a's execution,
	// neither with its own claim nor with a's.
	b := newTaskLife(t, n)
	b.claim(t)
	b.must(t, "start")
	cross := *b
	cross.id = a.id
	a.mustRefuse(t, 404, "claim_not_found", func() *nodetest.Resp { return cross.evidence(t, "", data, nil) })
	cross.tok, cross.gen, cross.exec = a.tok, a.gen, a.exec
	a.mustRefuse(t, 404, "claim_not_found", func() *nodetest.Resp { return cross.evidence(t, "", data, nil) })
	// b's execution on a's task.
	a.mustRefuse(t, 409, "execution_mismatch", func() *nodetest.Resp {
		return a.evidence(t, "", data, map[string]string{"X-Execution-Id": b.exec})
	})

	// The running lease expires: the device must stop.
	n.Advance(cfg.RunningLease)
	a.mustRefuse(t, 409, "lease_expired", func() *nodetest.Resp { return a.evidence(t, "", data, nil) })

	// Stale execution: recovered, re-authorized, claimed and started again
	// by the same device. The old execution, token and generation are refused.
	nodetest.Must(t, a.admin(t, "recover", map[string]any{"decision": "requeue", "reason": "silent", "expected_version": a.ver}), 200)
	a.mustRefuse(t, 404, "claim_not_found", func() *nodetest.Resp { return a.evidence(t, "", data, nil) })
	nodetest.Must(t, a.admin(t, "authorize", map[string]any{"expected_revision": 1, "ttl_seconds": 3600}), 200)
	nodetest.Must(t, a.d.Ready(), 200)
	old := *a
	a.claim(t)
	a.must(t, "start")
	if a.exec == old.exec || a.gen != old.gen+1 {
		t.Fatalf("new claim %d/%s after %d/%s", a.gen, a.exec, old.gen, old.exec)
	}
	a.mustRefuse(t, 403, "claim_token_mismatch", func() *nodetest.Resp { return old.evidence(t, "", data, nil) })
	withOldGen := *a
	withOldGen.gen = old.gen
	a.mustRefuse(t, 409, "claim_generation_mismatch", func() *nodetest.Resp { return withOldGen.evidence(t, "", data, nil) })
	withOldExec := *a
	withOldExec.exec = old.exec
	a.mustRefuse(t, 409, "execution_mismatch", func() *nodetest.Resp { return withOldExec.evidence(t, "", data, nil) })
	mustUploaded(t, a.evidence(t, "", data, nil), data)

	// A revoked device is refused at authentication.
	nodetest.Must(t, n.Do("POST", "/api/v1/admin/devices/"+b.d.ID+"/revoke", n.AdminToken, map[string]any{"reason": "lost"}, nil), 200)
	head := n.Head()
	r := b.evidence(t, "", data, nil)
	if r.Status != 401 || n.Head() != head {
		t.Fatalf("revoked device upload: %d %s", r.Status, r.Body)
	}
}

// Recorded outcomes and blobs survive a restart: the evidence key replays
// the same 201, the late report the same 409, and both blobs are served.
func TestReplaysSurviveRestart(t *testing.T) {
	n := nodetest.Start(t)
	img, shot := tinyJPEG(t, 5), tinyPNG(t)
	a := newTaskLife(t, n)
	nodetest.Must(t, putReferenceImage(n, a.id, img, ""), 200)
	nodetest.Must(t, a.admin(t, "authorize", map[string]any{"expected_revision": 2, "ttl_seconds": 3600}), 200)
	a.claim(t)
	a.must(t, "start")
	evKey, lateKey := nodetest.NewKey(), nodetest.NewKey()
	first := a.evidence(t, evKey, shot, nil)
	ev := mustUploaded(t, first, shot)
	n.Advance(n.Engine.Config().RunningLease)
	late := a.call(t, "complete", lateKey)
	nodetest.Must(t, late, 409, "lease_expired")

	m := n.Restart()
	a.n, a.d.N = m, m
	head := m.Head()
	again := a.evidence(t, evKey, shot, nil)
	nodetest.Must(t, again, 201)
	if !bytes.Equal(again.Body, first.Body) || again.Header.Get("Idempotent-Replayed") != "true" {
		t.Fatalf("evidence replay after restart: %s", again.Body)
	}
	lateAgain := a.call(t, "complete", lateKey)
	nodetest.Must(t, lateAgain, 409, "lease_expired")
	if m.Head() != head || len(m.Task(a.id)["late_reports"].([]any)) != 1 {
		t.Fatal("replays after restart appended")
	}
	get := m.Do("GET", "/api/v1/admin/tasks/"+a.id+"/evidence/"+nodetest.Str(ev, "evidence_id"), m.AdminToken, nil, nil)
	nodetest.Must(t, get, 200)
	if !bytes.Equal(get.Body, shot) {
		t.Fatal("evidence differs after restart")
	}
	// Recovered, re-authorized and re-claimed, the reference image is served
	// from the blob written before the restart.
	nodetest.Must(t, a.admin(t, "recover", map[string]any{"decision": "requeue", "reason": "r", "expected_version": a.ver}), 200)
	nodetest.Must(t, a.admin(t, "authorize", map[string]any{"expected_revision": 2, "ttl_seconds": 3600}), 200)
	nodetest.Must(t, a.d.Ready(), 200)
	a.claim(t)
	r := a.image(t, nil)
	nodetest.Must(t, r, 200)
	if !bytes.Equal(r.Body, img) {
		t.Fatal("reference image differs after restart")
	}
}
