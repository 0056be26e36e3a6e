package api_test

import (
	"bytes"
	"errors"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"taskledger/api"
	"taskledger/ledger"
	"taskledger/node/nodetest"
)

// blobUsage counts the files and bytes in the data directory's blobs/.
func blobUsage(t *testing.T, n *nodetest.Node) (files int, size int64, names []string) {
	t.Helper()
	entries, err := os.ReadDir(filepath.Join(n.Dir, "blobs"))
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range entries {
		info, err := e.Info()
		if err != nil {
			t.Fatal(err)
		}
		files++
		size += info.Size()
		names = append(names, e.Name())
	}
	return files, size, names
}

// mustBlobs fails unless blobs/ holds exactly want (names).
func mustBlobs(t *testing.T, n *nodetest.Node, what string, want ...string) {
	t.Helper()
	files, size, names := blobUsage(t, n)
	if files != len(want) || strings.Join(names, ",") != strings.Join(sortedCopy(want), ",") {
		t.Fatalf("%s: blobs/ holds %d files (%d bytes) %v, want %v", what, files, size, names, want)
	}
}

func sortedCopy(s []string) []string {
	out := append([]string(nil), s...)
	for i := range out {
		for j := i + 1; j < len(out); j++ {
			if out[j] < out[i] {
				out[i], out[j] = out[j], out[i]
			}
		}
	}
	return out
}

// rawEvidence sends an upload whose body comes from body (Content-Length
// size, or chunked when size < 0).
func rawEvidence(t *testing.T, l *taskLife, taskID string, body io.Reader, size int64, extra map[string]string) (*http.Response, []byte, error) {
	t.Helper()
	req, err := http.NewRequest("POST", l.n.URL+"/api/v1/device/tasks/"+taskID+"/evidence", body)
	if err != nil {
		t.Fatal(err)
	}
	req.ContentLength = size
	req.Header.Set("Authorization", "Bearer "+l.d.Token)
	for k, v := range l.evidenceHeaders("") {
		req.Header.Set(k, v)
	}
	for k, v := range extra {
		req.Header.Set(k, v)
	}
	res, err := l.n.HTTP.Do(req)
	if err != nil {
		return nil, nil, err
	}
	defer res.Body.Close()
	raw, _ := io.ReadAll(res.Body)
	return res, raw, nil
}

// chunked hides a reader's length so the request goes without
// Content-Length.
type chunked struct{ r io.Reader }

func (c chunked) Read(p []byte) (int, error) { return c.r.Read(p) }

// Uploads for a task the device does not hold (or with a stale token,
// generation or execution, or a lease that ended) are refused with the
// route's codes and leave no byte in blobs/: not the evidence, not a
// temporary file.
func TestEvidenceNotHeldStoresNothing(t *testing.T) {
	n := nodetest.Start(t)
	data := tinyPNG(t)
	big := padPNG(t, data, 8<<20)
	a := newTaskLife(t, n)
	a.claim(t)
	// CLAIMED, not started.
	a.mustRefuse(t, 409, "invalid_state", func() *nodetest.Resp { return a.evidence(t, "", big, nil) })
	mustBlobs(t, n, "claimed, not started")
	a.must(t, "start")
	b := newTaskLife(t, n)
	b.claim(t)
	b.must(t, "start")

	cross := *b
	cross.id = a.id
	crossClaim := cross
	crossClaim.tok, crossClaim.gen, crossClaim.exec = a.tok, a.gen, a.exec
	unknown := *a
	unknown.id = nodetest.NewKey()
	notUUID := *a
	notUUID.id = "not-a-task"
	cases := []struct {
		name   string
		l      *taskLife
		status int
		code   string
		extra  map[string]string
	}{
		{"another device's task", &cross, 404, "claim_not_found", nil},
		{"another device's task with its claim", &crossClaim, 404, "claim_not_found", nil},
		{"an unknown task", &unknown, 404, "claim_not_found", nil},
		{"a task id that is no UUID", &notUUID, 404, "claim_not_found", nil},
		{"another token", a, 403, "claim_token_mismatch", map[string]string{"X-Claim-Token": nodetest.NewClaimToken()}},
		{"another generation", a, 409, "claim_generation_mismatch", map[string]string{"X-Claim-Generation": "2"}},
		{"another execution", a, 409, "execution_mismatch", map[string]string{"X-Execution-Id": b.exec}},
	}
	for _, c := range cases {
		a.mustRefuse(t, c.status, c.code, func() *nodetest.Resp { return c.l.evidence(t, "", big, c.extra) })
		mustBlobs(t, n, c.name)
	}
	// Without Content-Length: refused the same, nothing stored.
	head := n.Head()
	res, raw, err := rawEvidence(t, &cross, a.id, chunked{bytes.NewReader(big)}, -1, nil)
	if err != nil || res.StatusCode != 404 || !strings.Contains(string(raw), "claim_not_found") || n.Head() != head {
		t.Fatalf("chunked upload to a task not held: %v %v %s", res, err, raw)
	}
	mustBlobs(t, n, "chunked, not held")
	// Body validation still comes first, and still stores nothing.
	a.mustRefuse(t, 400, "invalid_png", func() *nodetest.Resp { return cross.evidence(t, "", tinyJPEG(t, 1), nil) })
	a.mustRefuse(t, 400, "invalid_png", func() *nodetest.Resp { return cross.evidence(t, "", data[:20], nil) })
	res, raw, err = rawEvidence(t, &cross, a.id, chunked{io.MultiReader(bytes.NewReader(big), bytes.NewReader([]byte{0}))}, -1, nil)
	if err != nil || res.StatusCode != 413 || !strings.Contains(string(raw), "body_too_large") {
		t.Fatalf("chunked oversize to a task not held: %v %v %s", res, err, raw)
	}
	res, raw, err = rawEvidence(t, &cross, a.id, chunked{io.MultiReader(bytes.NewReader(tinyJPEG(t, 2)), bytes.NewReader(make([]byte, 8<<20)))}, -1, nil)
	if err != nil || res.StatusCode != 413 || !strings.Contains(string(raw), "body_too_large") {
		t.Fatalf("chunked oversize JPEG to a task not held: %v %v %s", res, err, raw)
	}
	mustBlobs(t, n, "invalid bodies, not held")
	// The running lease ends: refused, nothing stored.
	n.Advance(n.Engine.Config().RunningLease)
	a.mustRefuse(t, 409, "lease_expired", func() *nodetest.Resp { return a.evidence(t, "", big, nil) })
	mustBlobs(t, n, "lease expired")
}

// blobStages records the blob-write stages of a node and lets a test act
// at one (the upload waits meanwhile).
type blobStages struct {
	ch chan string
	at map[string]func()
}

func watchBlobs(n *nodetest.Node) *blobStages {
	s := &blobStages{ch: make(chan string, 64), at: map[string]func(){}}
	n.Blobs.SetHook(func(stage string) {
		if f := s.at[stage]; f != nil {
			delete(s.at, stage)
			f()
		}
		s.ch <- stage
	})
	return s
}

// wait returns once stage was told.
func (s *blobStages) wait(t *testing.T, stage string) {
	t.Helper()
	for got := range s.ch {
		if got == stage {
			return
		}
	}
}

// A refused upload leaves no temporary file: over the limit, a client that
// goes away mid-body, a lease that ends while the body streams, a refusal
// the sequencer finds after the blob took its name, a storage error.
func TestRefusedUploadLeavesNoTemporaryFile(t *testing.T) {
	l := driveTo(t, stRunning)
	n := l.n
	data := tinyPNG(t)
	stages := watchBlobs(n)

	// Over the limit without Content-Length: cut off at the limit.
	res, raw, err := rawEvidence(t, l, l.id, chunked{bytes.NewReader(padPNG(t, data, 8<<20+1))}, -1, nil)
	if err != nil || res.StatusCode != 413 || !strings.Contains(string(raw), "body_too_large") {
		t.Fatalf("chunked oversize: %v %v %s", res, err, raw)
	}
	stages.wait(t, ledger.BlobAborted)
	mustBlobs(t, n, "oversize")

	// The client goes away in the middle of the body.
	pr, pw := io.Pipe()
	done := make(chan error, 1)
	go func() {
		_, _, err := rawEvidence(t, l, l.id, pr, 8<<20, nil)
		done <- err
	}()
	// More than the client's write buffer, so that the headers go out.
	if _, err := pw.Write(padPNG(t, data, 64<<10)); err != nil {
		t.Fatal(err)
	}
	stages.wait(t, ledger.BlobCreated)
	pw.CloseWithError(errors.New("client gone"))
	if err := <-done; err == nil {
		t.Fatal("the cut request succeeded")
	}
	stages.wait(t, ledger.BlobAborted)
	mustBlobs(t, n, "client gone")

	// The lease ends while the body streams: refused before the rename.
	big := padPNG(t, data, 1<<20)
	head := n.Head()
	stages.at[ledger.BlobCreated] = func() { n.Advance(n.Engine.Config().RunningLease) }
	r := l.evidence(t, "", big, nil)
	nodetest.Must(t, r, 409, "lease_expired")
	stages.wait(t, ledger.BlobAborted)
	mustBlobs(t, n, "lease ended mid-body")
	if n.Head() != head { // the clock advance is not an event
		t.Fatalf("appended %d", n.Head()-head)
	}
}

// The sequencer refuses an upload whose blob already took its name (the
// lease ended between the last check and the decision): the blob goes,
// unless it existed before (another task's evidence with the same bytes).
func TestUploadRefusedAtCommitRemovesItsBlob(t *testing.T) {
	n := nodetest.Start(t)
	data := tinyPNG(t)
	shared := padPNG(t, data, 4096)
	a := newTaskLife(t, n)
	a.claim(t)
	a.must(t, "start")
	b := newTaskLife(t, n)
	b.claim(t)
	b.must(t, "start")
	mustUploaded(t, b.evidence(t, "", shared, nil), shared)
	stages := watchBlobs(n)
	// Both leases end once the blob is renamed: the decision refuses.
	stages.at[ledger.BlobRenamed] = func() { n.Advance(n.Engine.Config().RunningLease) }
	a.mustRefuse(t, 409, "lease_expired", func() *nodetest.Resp { return a.evidence(t, "", data, nil) })
	stages.wait(t, ledger.BlobRemoved)
	mustBlobs(t, n, "refused at commit", sha256Hex(shared))

	// Re-claimed and started again, the same device uploads b's bytes; the
	// decision refuses again: b's blob is referenced and stays.
	nodetest.Must(t, a.admin(t, "recover", map[string]any{"decision": "requeue", "reason": "r", "expected_version": a.ver}), 200)
	nodetest.Must(t, a.admin(t, "authorize", map[string]any{"expected_revision": 1, "ttl_seconds": 3600}), 200)
	nodetest.Must(t, a.d.Ready(), 200)
	a.claim(t)
	a.must(t, "start")
	stages.at[ledger.BlobRenamed] = func() { n.Advance(n.Engine.Config().RunningLease) }
	a.mustRefuse(t, 409, "lease_expired", func() *nodetest.Resp { return a.evidence(t, "", shared, nil) })
	mustBlobs(t, n, "refused at commit, shared blob", sha256Hex(shared))
	get := n.Do("GET", "/api/v1/admin/tasks/"+b.id, n.AdminToken, nil, nil)
	ev := get.JSON()["evidence"].([]any)[0].(map[string]any)
	nodetest.Must(t, n.Do("GET", "/api/v1/admin/tasks/"+b.id+"/evidence/"+nodetest.Str(ev, "evidence_id"), n.AdminToken, nil, nil), 200)
}

// A replay or a conflict of an upload key hashes the body and stores
// nothing new.
func TestUploadKeyReplayStoresNothing(t *testing.T) {
	l := driveTo(t, stRunning)
	n := l.n
	data := tinyPNG(t)
	other := padPNG(t, data, 2048)
	key := nodetest.NewKey()
	first := l.evidence(t, key, data, nil)
	mustUploaded(t, first, data)
	l.mustRefuse(t, 409, "idempotency_conflict", func() *nodetest.Resp { return l.evidence(t, key, other, nil) })
	again := l.evidence(t, key, data, nil)
	nodetest.Must(t, again, 201)
	if again.Header.Get("Idempotent-Replayed") != "true" || !bytes.Equal(again.Body, first.Body) {
		t.Fatalf("replay: %s", again.Body)
	}
	l.mustRefuse(t, 400, "invalid_png", func() *nodetest.Resp { return l.evidence(t, key, tinyJPEG(t, 4), nil) })
	mustBlobs(t, n, "replay and conflict", sha256Hex(data))
}

// Each device may have --device-upload-inflight bytes of uploads in
// flight; past it, 429 rate_limited with Retry-After, nothing stored or
// appended. Other devices are not affected.
func TestUploadQuotaBoundsBytesInFlight(t *testing.T) {
	n := nodetest.Start(t)
	n.API.SetLimits(api.Limits{DeviceUploadInflight: 8 << 20})
	data := tinyPNG(t)
	big := padPNG(t, data, 8<<20)
	a := newTaskLife(t, n)
	a.claim(t)
	a.must(t, "start")
	b := newTaskLife(t, n)
	b.claim(t)
	b.must(t, "start")
	stages := watchBlobs(n)

	pr, pw := io.Pipe()
	type answer struct {
		res *http.Response
		raw []byte
		err error
	}
	done := make(chan answer, 1)
	go func() {
		res, raw, err := rawEvidence(t, a, a.id, pr, int64(len(big)), nil)
		done <- answer{res, raw, err}
	}()
	if _, err := pw.Write(big[:64<<10]); err != nil {
		t.Fatal(err)
	}
	stages.wait(t, ledger.BlobCreated)
	files, _, _ := blobUsage(t, n)
	head := n.Head()
	r := a.evidence(t, "", data, nil)
	nodetest.Must(t, r, 429, "rate_limited")
	if secs, err := strconv.Atoi(r.Header.Get("Retry-After")); err != nil || secs < 1 {
		t.Fatalf("Retry-After %q", r.Header.Get("Retry-After"))
	}
	if f, _, _ := blobUsage(t, n); f != files || n.Head() != head {
		t.Fatalf("the refused upload stored or appended: %d files (was %d), head %d (was %d)", f, files, n.Head(), head)
	}
	if line := metricLine(t, n, `taskledger_rate_limited_total{limit="upload"}`); !strings.HasSuffix(line, " 1") {
		t.Fatalf("metric: %q", line)
	}
	// Another device has its own quota.
	mustUploaded(t, b.evidence(t, "", data, nil), data)
	// The upload in flight finishes; its bytes are free again.
	go func() {
		pw.Write(big[64<<10:])
		pw.Close()
	}()
	got := <-done
	if got.err != nil || got.res.StatusCode != 201 {
		t.Fatalf("the upload in flight: %v %v %s", got.res, got.err, got.raw)
	}
	mustUploaded(t, a.evidence(t, "", data, nil), data)
	mustBlobs(t, n, "after the quota", sha256Hex(data), sha256Hex(big))
}

// Evidence whose blob is damaged or missing answers 503 with Retry-After
// and an empty body, never a 500 and never the damaged bytes.
func TestDamagedEvidenceAnswersUnavailable(t *testing.T) {
	l := driveTo(t, stRunning)
	n := l.n
	data := tinyPNG(t)
	ev := mustUploaded(t, l.evidence(t, "", data, nil), data)
	path := filepath.Join(n.Dir, "blobs", sha256Hex(data))
	get := func() *nodetest.Resp {
		return n.Do("GET", "/api/v1/admin/tasks/"+l.id+"/evidence/"+nodetest.Str(ev, "evidence_id"), n.AdminToken, nil, nil)
	}
	damaged := append([]byte(nil), data...)
	damaged[len(damaged)-1] ^= 0xff
	if err := os.WriteFile(path, damaged, 0o600); err != nil {
		t.Fatal(err)
	}
	mustUnavailable(t, "damaged evidence", get())
	if err := os.Remove(path); err != nil {
		t.Fatal(err)
	}
	mustUnavailable(t, "missing evidence", get())
	// Ready stays: one lost blob is not a failing disk.
	nodetest.Must(t, n.Do("GET", "/readyz", "", nil, nil), 200)
	if err := os.WriteFile(path, data, 0o600); err != nil {
		t.Fatal(err)
	}
	if r := get(); r.Status != 200 || !bytes.Equal(r.Body, data) {
		t.Fatalf("restored evidence: %d", r.Status)
	}
}
