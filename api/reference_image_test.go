package api_test

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"os"
	"path/filepath"
	"strconv"
	"testing"

	"taskledger/node/nodetest"
)

// padJPEG inserts COM segments after the SOI marker of a JPEG so that it
// is exactly size bytes long and still a real, decodable JPEG.
func padJPEG(t testing.TB, j []byte, size int) []byte {
	t.Helper()
	extra := size - len(j)
	if extra < 4 {
		t.Fatalf("cannot pad %d bytes to %d", len(j), size)
	}
	out := append([]byte{}, j[:2]...)
	for extra > 0 {
		seg := min(extra, 65537)
		if rest := extra - seg; rest > 0 && rest < 4 {
			seg -= 4
		}
		l := seg - 2
		out = append(out, 0xff, 0xfe, byte(l>>8), byte(l))
		out = append(out, bytes.Repeat([]byte{'c'}, l-2)...)
		extra -= seg
	}
	return append(out, j[2:]...)
}

func sha256Hex(b []byte) string {
	s := sha256.Sum256(b)
	return hex.EncodeToString(s[:])
}

// noStoragePath fails if a response body names the data directory or a blob path.
func noStoragePath(t testing.TB, n *nodetest.Node, body []byte) {
	t.Helper()
	if bytes.Contains(body, []byte(n.Dir)) || bytes.Contains(body, []byte("blobs/")) || bytes.Contains(body, []byte("blobs\\")) {
		t.Fatalf("response exposes a storage path: %s", body)
	}
}

func TestReferenceImagePut(t *testing.T) {
	n := nodetest.Start(t)
	l := newTaskLife(t, n)
	img := tinyJPEG(t, 1)

	refuse := func(data []byte, status int, code string, hdr map[string]string) {
		t.Helper()
		head := n.Head()
		h := map[string]string{"Content-Type": "image/jpeg"}
		for k, v := range hdr {
			h[k] = v
		}
		r := n.Do("PUT", "/api/v1/admin/tasks/"+l.id+"/reference-image", n.AdminToken, data, h)
		nodetest.Must(t, r, status, code)
		if n.Head() != head {
			t.Fatal("refused PUT appended")
		}
	}
	refuse(tinyPNG(t), 400, "invalid_jpeg", nil)
	refuse(img[:len(img)/2], 400, "invalid_jpeg", nil)
	refuse(append(append([]byte{}, img[:20]...), 0xff, 0xd9), 400, "invalid_jpeg", nil) // SOI…EOI, no frame
	refuse([]byte{}, 400, "invalid_jpeg", nil)
	refuse(padJPEG(t, img, 5<<20+1), 413, "body_too_large", nil)
	refuse(img, 415, "unsupported_media_type", map[string]string{"Content-Type": "image/png"})
	refuse(img, 400, "invalid_idempotency_key", map[string]string{"Idempotency-Key": "nope"})
	nodetest.Must(t, putReferenceImage(n, nodetest.NewKey(), img, ""), 404, "task_not_found")

	// Exactly 5 MiB is accepted. It is an amendment: revision +1, version
	// unchanged (the task stays PENDING), the authorization must be renewed.
	big := padJPEG(t, img, 5<<20)
	key := nodetest.NewKey()
	r := putReferenceImage(n, l.id, big, key)
	nodetest.Must(t, r, 200)
	noStoragePath(t, n, r.Body)
	doc := r.JSON()
	ri, _ := doc["reference_image"].(map[string]any)
	auth, _ := doc["authorization"].(map[string]any)
	if nodetest.Num(doc, "revision") != 2 || nodetest.Num(doc, "version") != 1 || nodetest.Str(doc, "state") != "PENDING" ||
		nodetest.Str(ri, "sha256") != sha256Hex(big) || nodetest.Num(ri, "size") != uint64(len(big)) ||
		nodetest.Str(auth, "status") == "ACTIVE" {
		t.Fatalf("PUT answer %s", r.Body[:min(len(r.Body), 600)])
	}
	stored, err := os.ReadFile(filepath.Join(n.Dir, "blobs", sha256Hex(big)))
	if err != nil || !bytes.Equal(stored, big) {
		t.Fatalf("blob file: %v", err)
	}
	// replay, and the same key with other bytes
	head := n.Head()
	again := putReferenceImage(n, l.id, big, key)
	nodetest.Must(t, again, 200)
	if again.Header.Get("Idempotent-Replayed") != "true" || n.Head() != head {
		t.Fatal("PUT replay appended or was not marked")
	}
	refuse(img, 409, "idempotency_conflict", map[string]string{"Idempotency-Key": key})

	// Claimable only once re-authorized for revision 2.
	nothing, _ := l.d.Claim()
	nodetest.Must(t, nothing, 204)
	l.mustRefuse(t, 409, "revision_mismatch", func() *nodetest.Resp {
		return l.admin(t, "authorize", map[string]any{"expected_revision": 1, "ttl_seconds": 3600})
	})

	nodetest.Must(t, l.admin(t, "authorize", map[string]any{"expected_revision": 2, "ttl_seconds": 3600}), 200)
	l.claim(t)
	c, _ := l.d.ClaimWith(nodetest.NewKey(), l.tok).JSON()["task"].(map[string]any) // resumed claim
	if nodetest.Str(c, "reference_image_url") != "/api/v1/device/tasks/"+l.id+"/reference-image" || nodetest.Num(c, "revision") != 2 {
		t.Fatalf("claim task %v", c)
	}
	got := l.image(t, nil)
	nodetest.Must(t, got, 200)
	if !bytes.Equal(got.Body, big) {
		t.Fatal("served image differs")
	}
}

func TestReferenceImageGet(t *testing.T) {
	n := nodetest.Start(t)
	cfg := n.Engine.Config()
	img := tinyJPEG(t, 9)
	a := newTaskLife(t, n)
	nodetest.Must(t, putReferenceImage(n, a.id, img, ""), 200)
	nodetest.Must(t, a.admin(t, "authorize", map[string]any{"expected_revision": 2, "ttl_seconds": 3600}), 200)
	a.rev = 2
	a.claim(t)

	serve := func(l *taskLife) {
		t.Helper()
		r := l.image(t, nil)
		nodetest.Must(t, r, 200)
		if !bytes.Equal(r.Body, img) || r.Header.Get("Content-Type") != "image/jpeg" ||
			r.Header.Get("Cache-Control") != "private, no-store" {
			t.Fatalf("served %d bytes with %v", len(r.Body), r.Header)
		}
	}
	serve(a)
	nodetest.Must(t, a.image(t, map[string]string{"X-Claim-Token": nodetest.NewClaimToken()}), 403, "claim_token_mismatch")
	nodetest.Must(t, a.image(t, map[string]string{"X-Claim-Token": "short"}), 400, "invalid_claim_token")
	nodetest.Must(t, a.image(t, map[string]string{"X-Claim-Generation": strconv.FormatUint(a.gen+1, 10)}), 409, "claim_generation_mismatch")
	nodetest.Must(t, a.image(t, map[string]string{"X-Claim-Generation": ""}), 400, "invalid_request")
	nodetest.Must(t, a.image(t, map[string]string{"X-Claim-Generation": "0"}), 400, "invalid_request")
	// another device, even with the holder's token and generation
	b := newTaskLife(t, n) // a second task, without image, and a second device
	probe := *b
	probe.tok, probe.gen, probe.id = a.tok, a.gen, a.id
	nodetest.Must(t, probe.image(t, nil), 404, "claim_not_found")
	probe.id = nodetest.NewKey()
	nodetest.Must(t, probe.image(t, nil), 404, "claim_not_found")

	// A task without an image: no URL in its claim, 404 no_reference_image.
	r, tok := b.d.Claim()
	nodetest.Must(t, r, 200)
	if task := r.JSON()["task"].(map[string]any); nodetest.Str(task, "id") != b.id {
		t.Fatalf("claimed %v", task["id"])
	} else if _, has := task["reference_image_url"]; has {
		t.Fatalf("claim of a task without image carries a URL: %s", r.Body)
	}
	plain := *b
	plain.tok = tok
	nodetest.Must(t, plain.image(t, nil), 404, "no_reference_image")

	// served while RUNNING and WAITING_CONFIRMATION
	a.must(t, "start")
	serve(a)
	a.must(t, "await-confirmation")
	serve(a)
	// expired running lease
	n.Advance(cfg.RunningLease)
	nodetest.Must(t, a.image(t, nil), 409, "lease_expired")
	nodetest.Must(t, a.admin(t, "recover", map[string]any{"decision": "requeue", "reason": "silent", "expected_version": a.ver}), 200)
	nodetest.Must(t, a.image(t, nil), 404, "claim_not_found")
	nodetest.Must(t, a.admin(t, "authorize", map[string]any{"expected_revision": 2, "ttl_seconds": 3600}), 200)
	nodetest.Must(t, a.d.Ready(), 200)
	old := *a
	a.claim(t)
	serve(a)
	nodetest.Must(t, old.image(t, nil), 403, "claim_token_mismatch")
	stale := *a
	stale.gen = old.gen
	nodetest.Must(t, stale.image(t, nil), 409, "claim_generation_mismatch")
	// expired claim lease (boundary: now == lease_expires_at)
	n.Advance(cfg.ClaimLease)
	nodetest.Must(t, a.image(t, nil), 409, "lease_expired")
	// re-claimed, finished: not held any more
	nodetest.Must(t, a.d.Ready(), 200)
	a.claim(t)
	serve(a)
	a.must(t, "start")
	a.must(t, "complete")
	nodetest.Must(t, a.image(t, nil), 404, "claim_not_found")
}
