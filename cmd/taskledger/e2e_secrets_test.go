package main_test

// No secret at rest (domain.md principle 5): a
// realistic session against the real binary, then every file of the data
// directory (raw bytes), the server's logs, the CLI outputs and every HTTP
// answer are searched for every device, admin and claim token used (and
// the claim-token secret). Answers must not carry token hashes either.

import (
	"bytes"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"sync"
	"testing"

	"github.com/google/uuid"

	"taskledger/node/nodetest"
	"taskledger/node/nodetest/proc"
)

// secret is one token the test must not find, with the answers allowed to
// carry it (the registration that shows a device token once, the claims
// that hand out a server-issued token).
type secret struct {
	name  string
	value string
	raw   []byte // the 32 random bytes behind it, when decodable
}

// forms are the byte strings that betray the secret itself.
func (s secret) forms() [][]byte {
	out := [][]byte{[]byte(s.value)}
	if len(s.raw) > 0 {
		out = append(out, s.raw, []byte(hex.EncodeToString(s.raw)), []byte(base64.StdEncoding.EncodeToString(s.raw)))
	}
	return out
}

// hashForms are the encodings of the secret's SHA-256 (of its text and of
// its raw bytes): allowed at rest and in logs, never in an answer.
func (s secret) hashForms() [][]byte {
	var out [][]byte
	for _, src := range [][]byte{[]byte(s.value), s.raw} {
		if len(src) == 0 {
			continue
		}
		h := sha256.Sum256(src)
		out = append(out, h[:], []byte(hex.EncodeToString(h[:])), []byte(strings.ToUpper(hex.EncodeToString(h[:]))),
			[]byte(base64.StdEncoding.EncodeToString(h[:])), []byte(base64.RawURLEncoding.EncodeToString(h[:])),
			[]byte(base64.RawStdEncoding.EncodeToString(h[:])))
	}
	return out
}

// newSecret decodes the random part of a token.
func newSecret(name, value string) secret {
	s := secret{name: name, value: value}
	body := value
	for _, p := range []string{"tldev_", "tladm_"} {
		body = strings.TrimPrefix(body, p)
	}
	if b, err := base64.RawURLEncoding.DecodeString(body); err == nil && len(b) == 32 {
		s.raw = b
	} else if b, err := hex.DecodeString(body); err == nil && len(b) == 32 {
		s.raw = b
	}
	return s
}

// seenAnswer is one recorded HTTP answer.
type seenAnswer struct {
	what  string
	bytes []byte // status, headers and body
	allow map[string]bool
}

type session struct {
	t       *testing.T
	c       *proc.Client
	url     string
	mu      sync.Mutex
	answers []*seenAnswer
}

// do sends a request and fails the test unless the status is want.
func (s *session) do(want int, method, path, token string, body any, headers map[string]string) map[string]any {
	s.t.Helper()
	a, err := s.c.Do(s.url, method, path, token, body, headers)
	if err != nil {
		s.t.Fatalf("%s %s: %v", method, path, err)
	}
	if a.Status != want {
		s.t.Fatalf("%s %s: want %d, got %s", method, path, want, a)
	}
	return a.JSON()
}

// allow marks the newest answer as allowed to carry the named secret.
func (s *session) allow(name string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.answers[len(s.answers)-1].allow[name] = true
}

var adminTokenLine = regexp.MustCompile(`^tladm_[A-Za-z0-9_-]{43}\n$`)

func TestE2ENoSecretAtRest(t *testing.T) {
	dir := t.TempDir()
	var cliOut []string

	// An operator token from the CLI: stdout is exactly the token.
	res := proc.CLI(t, "admin-token", "create", "ops", "--data", dir)
	if res.Code != 0 || !adminTokenLine.MatchString(res.Stdout) {
		t.Fatalf("admin-token create: exit %d, stdout %q (want exactly one token line), stderr %q", res.Code, res.Stdout, res.Stderr)
	}
	admin := strings.TrimSpace(res.Stdout)
	cliOut = append(cliOut, res.Stderr)
	if strings.Contains(res.Stderr, admin) {
		t.Fatalf("admin-token create wrote the token on stderr too: %q", res.Stderr)
	}
	res = proc.CLI(t, "admin-token", "create", "auditor", "--data", dir) // created, never used
	if res.Code != 0 || !adminTokenLine.MatchString(res.Stdout) {
		t.Fatalf("admin-token create auditor: exit %d, stdout %q", res.Code, res.Stdout)
	}
	auditor := strings.TrimSpace(res.Stdout)
	cliOut = append(cliOut, res.Stderr)

	claimSecret := make([]byte, 32)
	_, _ = rand.Read(claimSecret)
	secretHex := hex.EncodeToString(claimSecret)
	srv := startServer(t, dir, "--log-level", "debug", "--claim-token-secret", secretHex)

	secrets := map[string]secret{}
	add := func(name, value string) { secrets[name] = newSecret(name, value) }
	add("admin token ops", admin)
	add("admin token auditor", auditor)
	add("claim-token secret", secretHex)

	s := &session{t: t, c: proc.NewClient(), url: srv.URL}
	s.c.Seen = func(method, path string, a *nodetest.Resp) {
		var b bytes.Buffer
		fmt.Fprintf(&b, "%d\n", a.Status)
		_ = a.Header.Write(&b)
		b.Write(a.Body)
		s.mu.Lock()
		s.answers = append(s.answers, &seenAnswer{what: method + " " + path, bytes: b.Bytes(), allow: map[string]bool{}})
		s.mu.Unlock()
	}

	// Devices (A and B with the default checks, C with none required).
	type dev struct{ id, token, session string }
	register := func(name string, body map[string]any) dev {
		m := s.do(201, "POST", "/api/v1/admin/devices", admin, body, nil)
		d := dev{id: nodetest.Str(m, "device_id"), token: nodetest.Str(m, "token"), session: uuid.NewString()}
		add("device token "+name, d.token)
		s.allow("device token " + name)
		return d
	}
	A := register("A", map[string]any{"owner_id": uuid.NewString(), "name": "phone-a"})
	B := register("B", map[string]any{"owner_id": uuid.NewString(), "name": "phone-b"})
	C := register("C", map[string]any{"owner_id": uuid.NewString(), "name": "desktop-c", "required_checks": []string{}})
	var tasks []string
	for i := range 4 {
		m := s.do(201, "POST", "/api/v1/admin/tasks", admin, map[string]any{"payload": map[string]any{"step": i,
			"note": "open the app"}, "authorize": map[string]any{"ttl_seconds": 3600}}, nil)
		tasks = append(tasks, nodetest.Str(m, "id"))
	}
	for _, d := range []dev{A, B, C} {
		s.do(200, "POST", "/api/v1/device/heartbeat", d.token, presenceBody(d.id), nil)
	}
	claim := func(d dev, key, tok string) map[string]any {
		return s.do(200, "POST", "/api/v1/device/tasks/claim-next", d.token,
			map[string]any{"device_id": d.id, "session_id": d.session},
			map[string]string{"Idempotency-Key": key, "X-Claim-Token": tok})
	}
	call := func(want int, d dev, task, op, tok string, body map[string]any) map[string]any {
		body["device_id"] = d.id
		return s.do(want, "POST", "/api/v1/device/tasks/"+task+"/"+op, d.token, body, map[string]string{"X-Claim-Token": tok})
	}

	// A: claim (and its replay), start, heartbeat, complete.
	tokA := nodetest.NewClaimToken()
	add("claim token A", tokA)
	keyA := uuid.NewString()
	m := claim(A, keyA, tokA)
	claim(A, keyA, tokA) // replay
	taskA, gen, ver := nodetest.Str(nodetest.Obj(m, "task"), "id"), nodetest.Num(m, "claim_generation"), nodetest.Num(m, "version")
	m = call(200, A, taskA, "start", tokA, map[string]any{"claim_generation": gen, "expected_version": ver})
	exA := nodetest.Str(m, "execution_id")
	call(200, A, taskA, "heartbeat", tokA, map[string]any{"claim_generation": gen, "execution_id": exA, "step": "typing"})
	call(200, A, taskA, "complete", tokA, map[string]any{"claim_generation": gen, "execution_id": exA,
		"expected_version": nodetest.Num(m, "version"), "result": map[string]any{"ok": true}})

	// B: claim and release, claim again, start, operator cancel, heartbeat
	// sees cancel_requested, cancel-ack.
	tokB1, tokB2 := nodetest.NewClaimToken(), nodetest.NewClaimToken()
	add("claim token B1", tokB1)
	add("claim token B2", tokB2)
	m = claim(B, uuid.NewString(), tokB1)
	taskB := nodetest.Str(nodetest.Obj(m, "task"), "id")
	call(200, B, taskB, "release", tokB1, map[string]any{"claim_generation": nodetest.Num(m, "claim_generation"),
		"expected_version": nodetest.Num(m, "version")})
	m = claim(B, uuid.NewString(), tokB2)
	taskB, gen = nodetest.Str(nodetest.Obj(m, "task"), "id"), nodetest.Num(m, "claim_generation")
	m = call(200, B, taskB, "start", tokB2, map[string]any{"claim_generation": gen, "expected_version": nodetest.Num(m, "version")})
	exB := nodetest.Str(m, "execution_id")
	s.do(200, "POST", "/api/v1/admin/tasks/"+taskB+"/cancel", admin, map[string]any{"reason": "operator stop"}, nil)
	m = call(200, B, taskB, "heartbeat", tokB2, map[string]any{"claim_generation": gen, "execution_id": exB, "step": "typing"})
	if m["cancel_requested"] != true {
		t.Fatalf("heartbeat after cancel: cancel_requested %v", m["cancel_requested"])
	}
	call(200, B, taskB, "cancel-ack", tokB2, map[string]any{"claim_generation": gen, "execution_id": exB,
		"expected_version": nodetest.Num(m, "version")})

	// C: a server-issued claim token (the answer and its replay carry it),
	// start, heartbeat, fail.
	keyC := uuid.NewString()
	m = claim(C, keyC, "")
	tokC := nodetest.Str(nodetest.Obj(m, "claim"), "token")
	if len(tokC) != 64 {
		t.Fatalf("server-issued claim token %q", tokC)
	}
	add("server claim token C", tokC)
	s.allow("server claim token C")
	if nodetest.Str(nodetest.Obj(claim(C, keyC, ""), "claim"), "token") != tokC {
		t.Fatalf("the replay of a server-issued claim returned another token")
	}
	s.allow("server claim token C")
	taskC, gen := nodetest.Str(nodetest.Obj(m, "task"), "id"), nodetest.Num(m, "claim_generation")
	m = call(200, C, taskC, "start", tokC, map[string]any{"claim_generation": gen, "expected_version": nodetest.Num(m, "version")})
	exC := nodetest.Str(m, "execution_id")
	call(200, C, taskC, "heartbeat", tokC, map[string]any{"claim_generation": gen, "execution_id": exC, "step": "s1"})
	call(200, C, taskC, "fail", tokC, map[string]any{"claim_generation": gen, "execution_id": exC,
		"expected_version": nodetest.Num(m, "version"), "reason_code": "target_app_crashed", "detail": "crashed"})

	// Refusals that must not echo what they were sent.
	wrong := nodetest.NewClaimToken()
	add("wrong claim token", wrong)
	tokD := nodetest.NewClaimToken()
	add("claim token D", tokD)
	m = claim(A, uuid.NewString(), tokD) // A claims the last task
	taskD, gen := nodetest.Str(nodetest.Obj(m, "task"), "id"), nodetest.Num(m, "claim_generation")
	call(403, A, taskD, "release", wrong, map[string]any{"claim_generation": gen, "expected_version": nodetest.Num(m, "version")})
	call(404, B, taskD, "release", tokD, map[string]any{"claim_generation": gen, "expected_version": nodetest.Num(m, "version")})
	call(400, A, taskD, "release", tokD+"!", map[string]any{"claim_generation": gen, "expected_version": nodetest.Num(m, "version")})
	s.do(403, "GET", "/api/v1/admin/tasks/"+taskD, A.token, nil, nil)
	s.do(403, "POST", "/api/v1/device/heartbeat", admin, presenceBody(A.id), nil)
	s.do(401, "GET", "/api/v1/admin/tasks/"+taskD, admin+"x", nil, nil)
	s.do(401, "POST", "/api/v1/device/heartbeat", otherLast(A.token), presenceBody(A.id), nil)
	s.do(403, "POST", "/api/v1/device/heartbeat", A.token, presenceBody(B.id), nil)
	call(200, A, taskD, "release", tokD, map[string]any{"claim_generation": gen, "expected_version": nodetest.Num(m, "version")})

	// Reads: task details, histories, the global log, devices, metrics.
	for _, id := range tasks {
		s.do(200, "GET", "/api/v1/admin/tasks/"+id, admin, nil, nil)
		s.do(200, "GET", "/api/v1/admin/tasks/"+id+"/events", admin, nil, nil)
	}
	s.do(200, "GET", "/api/v1/admin/tasks", admin, nil, nil)
	s.do(200, "GET", "/api/v1/admin/events?limit=1000", admin, nil, nil)
	s.do(200, "GET", "/api/v1/admin/devices", admin, nil, nil)
	for _, d := range []dev{A, B, C} {
		s.do(200, "GET", "/api/v1/admin/devices/"+d.id, admin, nil, nil)
	}
	s.do(200, "GET", "/metrics", "", nil, nil)

	if code := srv.Stop(t); code != 0 {
		t.Fatalf("serve exited %d after SIGTERM", code)
	}
	res = proc.CLI(t, "verify", "--data", dir, "--claim-token-secret", secretHex)
	if res.Code != 0 {
		t.Fatalf("verify: exit %d\n%s%s", res.Code, res.Stdout, res.Stderr)
	}
	cliOut = append(cliOut, res.Stdout, res.Stderr)

	// The initial admin token, if serve wrote one, is allowed only in its file.
	initialFile := filepath.Join(dir, "initial-admin-token")
	if raw, err := os.ReadFile(initialFile); err == nil {
		add("initial admin token", strings.TrimSpace(string(raw)))
	}

	names := make([]string, 0, len(secrets))
	for n := range secrets {
		names = append(names, n)
	}
	sort.Strings(names)
	if len(names) < 12 {
		t.Fatalf("only %d secrets collected", len(names))
	}

	// 1. Every file of the data directory, raw bytes.
	files := 0
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		raw, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		files++
		for _, n := range names {
			if n == "initial admin token" && p == initialFile {
				continue
			}
			for _, f := range secrets[n].forms() {
				if bytes.Contains(raw, f) {
					t.Errorf("%s found in %s", n, p)
					break
				}
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}

	// 2. The server's logs and the CLI's outputs.
	logs := srv.Stderr()
	if !strings.Contains(logs, "claim-next") && !strings.Contains(logs, A.id) {
		t.Fatalf("the server's logs do not mention the requests; nothing to search:\n%s", logs)
	}
	for i, out := range append([]string{logs}, cliOut...) {
		for _, n := range names {
			for _, f := range secrets[n].forms() {
				if bytes.Contains([]byte(out), f) {
					t.Errorf("%s found in output %d (0 = server log)", n, i)
					break
				}
			}
		}
	}
	if strings.Contains(logs, "Bearer") {
		t.Errorf("the server's log carries an Authorization header")
	}

	// 3. Every answer: no secret unless it is the one answer that shows
	// it, and never a token hash.
	for _, a := range s.answers {
		for _, n := range names {
			if !a.allow[n] {
				for _, f := range secrets[n].forms() {
					if bytes.Contains(a.bytes, f) {
						t.Errorf("%s found in the answer to %s", n, a.what)
						break
					}
				}
			}
			for _, f := range secrets[n].hashForms() {
				if bytes.Contains(a.bytes, f) {
					t.Errorf("a hash of the %s found in the answer to %s", n, a.what)
					break
				}
			}
		}
	}
	// Positive controls: the answers that may show a secret do show it.
	for _, want := range []string{"device token A", "server claim token C"} {
		found := false
		for _, a := range s.answers {
			if a.allow[want] && bytes.Contains(a.bytes, []byte(secrets[want].value)) {
				found = true
			}
		}
		if !found {
			t.Errorf("no answer shows the %s: the search would prove nothing", want)
		}
	}
	t.Logf("no secret at rest: %d secrets × %d files, %d bytes of server log, %d answers searched",
		len(names), files, len(logs), len(s.answers))
}

// otherLast is tok with its last character replaced by another one (a
// fixed replacement would leave a token ending in it unchanged).
func otherLast(tok string) string {
	last := byte('A')
	if tok[len(tok)-1] == last {
		last = 'B'
	}
	return tok[:len(tok)-1] + string(last)
}
