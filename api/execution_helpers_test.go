package api_test

import (
	"bytes"
	"image"
	"image/color"
	"image/jpeg"
	"image/png"
	"strconv"
	"testing"

	"taskledger/node/nodetest"
)

// taskLife is a task driven to a state by one device, with everything that
// device knows about it.
type taskLife struct {
	n    *nodetest.Node
	d    *nodetest.Device
	id   string
	tok  string // claim token ("" before a claim: a random one is used)
	gen  uint64
	exec string
	ver  uint64
	rev  uint64
	// claimLease is the claim's lease_expires_at as the claim answered it.
	claimLease string
}

// newTaskLife creates an authorized task and a ready device (nothing claimed).
func newTaskLife(t *testing.T, n *nodetest.Node) *taskLife {
	t.Helper()
	d := n.ReadyDevice(t)
	id := n.CreateTask(map[string]any{"n": 1})
	return &taskLife{n: n, d: d, id: id, tok: nodetest.NewClaimToken(), gen: 1, exec: nodetest.NewKey(), ver: 1, rev: 1}
}

func (l *taskLife) claim(t *testing.T) {
	t.Helper()
	r, tok := l.d.Claim()
	nodetest.Must(t, r, 200)
	m := r.JSON()
	if got := nodetest.Str(m["task"].(map[string]any), "id"); got != l.id {
		t.Fatalf("claimed %s, want %s", got, l.id)
	}
	l.tok, l.gen, l.ver = tok, nodetest.Num(m, "claim_generation"), nodetest.Num(m, "version")
	l.claimLease = nodetest.Str(m["claim"].(map[string]any), "lease_expires_at")
}

// call sends a task-scoped call with the life's generation, execution and
// version filled in as the op needs them.
func (l *taskLife) call(t *testing.T, op string, key string) *nodetest.Resp {
	t.Helper()
	if op == "evidence" {
		return l.evidence(t, key, tinyPNG(t), nil)
	}
	return l.d.Call(l.id, deviceOpPath(op), l.tok, l.body(op), key)
}

func deviceOpPath(op string) string {
	if op == "renew" {
		return "lease/renew"
	}
	return op
}

func (l *taskLife) body(op string) map[string]any {
	b := map[string]any{"claim_generation": l.gen}
	switch op {
	case "renew":
		b["session_id"], b["expected_lease_expires_at"] = l.d.Session, l.claimLease
		if l.claimLease == "" {
			b["expected_lease_expires_at"] = "2026-01-01T00:00:00.000Z"
		}
	case "release", "start":
		b["expected_version"] = l.ver
	case "heartbeat":
		b["execution_id"], b["step"] = l.exec, "step-1"
	default:
		b["execution_id"], b["expected_version"] = l.exec, l.ver
	}
	switch op {
	case "await-confirmation":
		b["reason"] = "needs a human"
	case "complete":
		b["result"] = map[string]any{"ok": true, "items": []any{1, 2}}
	case "fail":
		b["reason_code"], b["detail"] = "target_crashed", "the target app crashed"
	}
	return b
}

// must sends op and requires 200, then updates version and execution.
func (l *taskLife) must(t *testing.T, op string) map[string]any {
	t.Helper()
	r := l.call(t, op, "")
	nodetest.Must(t, r, 200)
	m := r.JSON()
	l.ver = nodetest.Num(m, "version")
	if ex := nodetest.Str(m, "execution_id"); ex != "" {
		l.exec = ex
	}
	return m
}

// evidenceHeaders are the headers of an evidence upload for this life.
func (l *taskLife) evidenceHeaders(key string) map[string]string {
	if key == "" {
		key = nodetest.NewKey()
	}
	return map[string]string{"Idempotency-Key": key, "X-Claim-Token": l.tok,
		"X-Claim-Generation": strconv.FormatUint(l.gen, 10), "X-Execution-Id": l.exec,
		"X-Evidence-Kind": "screenshot", "X-Captured-At": "2026-03-01T10:00:00.123Z", "Content-Type": "image/png"}
}

// evidence uploads data; extra headers override (a "" value removes one).
func (l *taskLife) evidence(t *testing.T, key string, data []byte, extra map[string]string) *nodetest.Resp {
	t.Helper()
	h := l.evidenceHeaders(key)
	for k, v := range extra {
		h[k] = v
	}
	return l.n.Do("POST", "/api/v1/device/tasks/"+l.id+"/evidence", l.d.Token, data, h)
}

// image sends GET /device/tasks/{id}/reference-image with the life's token
// and generation, overridden by extra.
func (l *taskLife) image(t *testing.T, extra map[string]string) *nodetest.Resp {
	t.Helper()
	h := map[string]string{"X-Claim-Token": l.tok, "X-Claim-Generation": strconv.FormatUint(l.gen, 10)}
	for k, v := range extra {
		h[k] = v
	}
	return l.n.Do("GET", "/api/v1/device/tasks/"+l.id+"/reference-image", l.d.Token, nil, h)
}

// admin sends an operator call on the task.
func (l *taskLife) admin(t *testing.T, op string, body any) *nodetest.Resp {
	t.Helper()
	return l.n.Do("POST", "/api/v1/admin/tasks/"+l.id+"/"+op, l.n.AdminToken, body, nil)
}

// putReferenceImage sends PUT /admin/tasks/{id}/reference-image.
func putReferenceImage(n *nodetest.Node, id string, data []byte, key string) *nodetest.Resp {
	h := map[string]string{"Content-Type": "image/jpeg"}
	if key != "" {
		h["Idempotency-Key"] = key
	}
	return n.Do("PUT", "/api/v1/admin/tasks/"+id+"/reference-image", n.AdminToken, data, h)
}

// Driven states: the seven states of domain.md plus the variants whose
// lease expired or whose cancel was requested.
const (
	stPending       = "PENDING"
	stClaimed       = "CLAIMED"
	stClaimedStale  = "CLAIMED(claim lease expired)"
	stRunning       = "RUNNING"
	stRunningCancel = "RUNNING(cancel requested)"
	stRunningStale  = "RUNNING(running lease expired)"
	stWaiting       = "WAITING_CONFIRMATION"
	stWaitingCancel = "WAITING_CONFIRMATION(cancel requested)"
	stSucceeded     = "SUCCEEDED"
	stFailed        = "FAILED"
	stCanceled      = "CANCELED"
)

var drivenStates = []string{stPending, stClaimed, stClaimedStale, stRunning, stRunningCancel, stRunningStale,
	stWaiting, stWaitingCancel, stSucceeded, stFailed, stCanceled}

// driveTo starts a fresh node and drives a new task to state.
func driveTo(t *testing.T, state string) *taskLife {
	t.Helper()
	n := nodetest.Start(t)
	l := newTaskLife(t, n)
	cfg := n.Engine.Config()
	switch state {
	case stPending:
		return l
	case stClaimed:
		l.claim(t)
		return l
	case stClaimedStale:
		l.claim(t)
		n.Advance(cfg.ClaimLease) // boundary: now == lease_expires_at is expired
		return l
	}
	l.claim(t)
	l.must(t, "start")
	switch state {
	case stRunning:
	case stRunningCancel:
		nodetest.Must(t, l.admin(t, "cancel", map[string]any{"reason": "stop"}), 200)
	case stRunningStale:
		n.Advance(cfg.RunningLease)
	case stWaiting:
		l.must(t, "await-confirmation")
	case stWaitingCancel:
		l.must(t, "await-confirmation")
		nodetest.Must(t, l.admin(t, "cancel", map[string]any{"reason": "stop"}), 200)
	case stSucceeded:
		l.must(t, "complete")
	case stFailed:
		l.must(t, "fail")
	case stCanceled:
		nodetest.Must(t, l.admin(t, "cancel", map[string]any{"reason": "stop"}), 200)
		l.must(t, "cancel-ack")
	default:
		t.Fatalf("unknown state %s", state)
	}
	return l
}

// tinyPNG is a real 2×2 PNG.
func tinyPNG(t testing.TB) []byte {
	t.Helper()
	img := image.NewNRGBA(image.Rect(0, 0, 2, 2))
	img.Set(1, 1, color.NRGBA{R: 200, A: 255})
	var b bytes.Buffer
	if err := png.Encode(&b, img); err != nil {
		t.Fatal(err)
	}
	return b.Bytes()
}

// tinyJPEG is a real 8×8 JPEG whose content depends on seed.
func tinyJPEG(t testing.TB, seed uint8) []byte {
	t.Helper()
	img := image.NewRGBA(image.Rect(0, 0, 8, 8))
	for i := range img.Pix {
		img.Pix[i] = seed + uint8(i)
	}
	var b bytes.Buffer
	if err := jpeg.Encode(&b, img, nil); err != nil {
		t.Fatal(err)
	}
	return b.Bytes()
}

// mustHoldNoSecret fails if body holds a token of the life (device, claim,
// admin) or its SHA-256 in hex.
func (l *taskLife) mustHoldNoSecret(t testing.TB, body []byte) {
	t.Helper()
	nodetest.MustHoldNoSecret(t, "response", body, l.d.Token, l.tok, l.n.AdminToken)
}
