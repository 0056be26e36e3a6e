package main_test

// Real-binary tests: start-up refusals (wrong, missing and
// reused claim-token secrets; a claim lease not shorter than the minimum
// authorization TTL) and a server-issued claim token that survives a
// SIGKILL between the claim's commit and its response. Each refusal must
// exit non-zero with a clear message and leave the data directory
// unchanged byte for byte.

import (
	"bufio"
	"bytes"
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"io"
	"io/fs"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/google/uuid"

	"taskledger/ledger"
	"taskledger/node/nodetest/proc"
)

// refusalDeadline bounds every subprocess wait: a hang fails the test
// instead of blocking the suite (a deadline, not a timing assertion).
const refusalDeadline = 60 * time.Second

// refusalSecret returns a new claim-token secret (64 lowercase hex).
func refusalSecret(t *testing.T) string {
	t.Helper()
	var b [32]byte
	if _, err := rand.Read(b[:]); err != nil {
		t.Fatal(err)
	}
	return hex.EncodeToString(b[:])
}

// refusalServer is a running `taskledger serve` subprocess.
type refusalServer struct {
	t      *testing.T
	cmd    *exec.Cmd
	url    string
	dir    string
	admin  string
	mu     sync.Mutex
	stderr bytes.Buffer
	exited chan struct{}
	err    error // Wait's result, set before exited closes
}

var refusalListeningRE = regexp.MustCompile(`taskledger: listening on (\S+)`)

// refusalStart starts `taskledger serve --data dir --listen 127.0.0.1:0
// --clock=manual` plus args, with env added to the environment, and waits
// until it says where it listens.
func refusalStart(t *testing.T, dir string, env []string, args ...string) *refusalServer {
	t.Helper()
	cmd := exec.Command(proc.Taskledger(t), append([]string{"serve", "--data", dir, "--listen", "127.0.0.1:0", "--clock=manual",
		"--log-level", "error"}, args...)...)
	cmd.Env = append(refusalEnv(), env...)
	pipe, err := cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	s := &refusalServer{t: t, cmd: cmd, dir: dir, exited: make(chan struct{})}
	addr := make(chan string, 1)
	go func() {
		sc := bufio.NewScanner(pipe)
		for sc.Scan() {
			line := sc.Text()
			s.mu.Lock()
			s.stderr.WriteString(line + "\n")
			s.mu.Unlock()
			if m := refusalListeningRE.FindStringSubmatch(line); m != nil {
				select {
				case addr <- m[1]:
				default:
				}
			}
		}
		_, _ = io.Copy(io.Discard, pipe)
		s.err = cmd.Wait()
		close(s.exited)
	}()
	t.Cleanup(func() {
		select {
		case <-s.exited:
		default:
			_ = cmd.Process.Kill()
			<-s.exited
		}
	})
	select {
	case a := <-addr:
		s.url = "http://" + a
	case <-s.exited:
		t.Fatalf("serve exited before listening: %v\n%s", s.err, s.log())
	case <-time.After(refusalDeadline):
		t.Fatalf("serve did not start listening within %s\n%s", refusalDeadline, s.log())
	}
	tok, err := os.ReadFile(filepath.Join(dir, "initial-admin-token"))
	if err != nil {
		t.Fatalf("initial admin token: %v", err)
	}
	s.admin = strings.TrimSpace(string(tok))
	return s
}

// refusalEnv is the environment without any TASKLEDGER_ setting of the
// caller's shell, so every test controls its own configuration.
func refusalEnv() []string {
	var env []string
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "TASKLEDGER_") {
			env = append(env, kv)
		}
	}
	return env
}

func (s *refusalServer) log() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.stderr.String()
}

// stop sends SIGTERM and waits for a clean exit.
func (s *refusalServer) stop() {
	s.t.Helper()
	_ = s.cmd.Process.Signal(syscall.SIGTERM)
	s.wait()
	if s.err != nil {
		s.t.Fatalf("serve did not exit cleanly: %v\n%s", s.err, s.log())
	}
}

// wait waits for the process to exit.
func (s *refusalServer) wait() {
	s.t.Helper()
	select {
	case <-s.exited:
	case <-time.After(refusalDeadline):
		s.t.Fatalf("serve did not exit within %s", refusalDeadline)
	}
}

type refusalResp struct {
	status int
	header http.Header
	body   []byte
	err    error
}

func (r *refusalResp) json() map[string]any {
	var m map[string]any
	_ = json.Unmarshal(r.body, &m)
	return m
}

// do sends one request; a transport error is returned in err (the kill
// test expects one).
func (s *refusalServer) do(method, path, token string, body any, headers map[string]string) *refusalResp {
	var rd io.Reader
	if body != nil {
		raw, _ := json.Marshal(body)
		rd = bytes.NewReader(raw)
	}
	req, err := http.NewRequest(method, s.url+path, rd)
	if err != nil {
		return &refusalResp{err: err}
	}
	req.Header.Set("Authorization", "Bearer "+token)
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	if method == "POST" {
		req.Header.Set("Idempotency-Key", uuid.NewString())
	}
	for k, v := range headers {
		req.Header.Set(k, v)
	}
	client := &http.Client{Timeout: refusalDeadline}
	res, err := client.Do(req)
	if err != nil {
		return &refusalResp{err: err}
	}
	defer res.Body.Close()
	raw, err := io.ReadAll(res.Body)
	return &refusalResp{status: res.StatusCode, header: res.Header, body: raw, err: err}
}

// must fails unless the request got status.
func (s *refusalServer) must(r *refusalResp, status int) map[string]any {
	s.t.Helper()
	if r.err != nil || r.status != status {
		s.t.Fatalf("want %d, got %d %s (err %v)", status, r.status, r.body, r.err)
	}
	return r.json()
}

// refusalDevice registers a device, sends a ready heartbeat and creates
// one authorized task; it returns the device id, its token and the task id.
func (s *refusalServer) refusalDevice() (string, string, string) {
	s.t.Helper()
	d := s.must(s.do("POST", "/api/v1/admin/devices", s.admin, map[string]any{"owner_id": uuid.NewString(), "name": "phone"}, nil), 201)
	id, tok := d["device_id"].(string), d["token"].(string)
	s.must(s.do("POST", "/api/v1/device/heartbeat", tok, map[string]any{"device_id": id, "app_version": "1", "os_version": "1",
		"target_app_version": "1", "checks": map[string]bool{"accessibility_connected": true, "target_app_installed": true}}, nil), 200)
	task := s.must(s.do("POST", "/api/v1/admin/tasks", s.admin, map[string]any{"payload": map[string]any{"n": 1},
		"authorize": map[string]any{"ttl_seconds": 3600}}, nil), 201)
	return id, tok, task["id"].(string)
}

// refusalClaimBody is claim-next's body for a device and session.
func refusalClaimBody(device, session string) map[string]any {
	return map[string]any{"device_id": device, "session_id": session}
}

// refusalSeedServerClaims creates a ledger holding a server-issued claim
// under secret and returns its directory.
func refusalSeedServerClaims(t *testing.T, secret string) string {
	t.Helper()
	dir := t.TempDir()
	s := refusalStart(t, dir, nil, "--claim-token-secret", secret)
	dev, tok, _ := s.refusalDevice()
	r := s.must(s.do("POST", "/api/v1/device/tasks/claim-next", tok, refusalClaimBody(dev, uuid.NewString()), nil), 200)
	if ct, _ := r["claim"].(map[string]any)["token"].(string); len(ct) != 64 {
		t.Fatalf("no server-issued token in %v", r)
	}
	s.stop()
	return dir
}

// refusalHashDir returns the SHA-256 of every file and the list of every
// directory under dir.
func refusalHashDir(t *testing.T, dir string) map[string]string {
	t.Helper()
	out := map[string]string{}
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(dir, p)
		if d.IsDir() {
			out[rel+"/"] = "dir"
			return nil
		}
		raw, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		sum := sha256.Sum256(raw)
		out[rel] = hex.EncodeToString(sum[:])
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// refusalMustRefuse runs `serve` on dir with args (and env), expects a
// non-zero exit whose stderr contains every want, and the data directory
// unchanged byte for byte.
func refusalMustRefuse(t *testing.T, dir string, env []string, args []string, want ...string) {
	t.Helper()
	before := refusalHashDir(t, dir)
	ctx, cancel := context.WithTimeout(context.Background(), refusalDeadline)
	defer cancel()
	cmd := exec.CommandContext(ctx, proc.Taskledger(t), append([]string{"serve", "--data", dir, "--listen", "127.0.0.1:0",
		"--clock=manual"}, args...)...)
	cmd.Env = append(refusalEnv(), env...)
	var stderr refusalStderr
	stderr.cancel = cancel // a server that starts listening was not refused: stop it at once
	cmd.Stderr = &stderr
	err := cmd.Run()
	var ee *exec.ExitError
	if !errors.As(err, &ee) || ee.ExitCode() <= 0 {
		t.Fatalf("serve %v: want a non-zero exit, got %v\n%s", args, err, stderr.String())
	}
	for _, w := range want {
		if !strings.Contains(stderr.String(), w) {
			t.Errorf("serve %v: stderr %q does not say %q", args, stderr.String(), w)
		}
	}
	after := refusalHashDir(t, dir)
	if len(before) != len(after) {
		t.Errorf("data directory entries changed: %v → %v", before, after)
	}
	for k, v := range before {
		if after[k] != v {
			t.Errorf("data directory changed at %s", k)
		}
	}
}

// refusalStderr collects a refused serve's stderr and cancels the run as
// soon as the server says it listens (it was not refused).
type refusalStderr struct {
	mu     sync.Mutex
	buf    bytes.Buffer
	cancel func()
}

func (w *refusalStderr) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.buf.Write(p)
	if strings.Contains(w.buf.String(), "taskledger: listening on") {
		w.cancel()
	}
	return len(p), nil
}

func (w *refusalStderr) String() string {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.buf.String()
}

func TestStartupRefusesWrongClaimSecret(t *testing.T) {
	good := refusalSecret(t)
	dir := refusalSeedServerClaims(t, good)
	msg := "does not reproduce the server-issued claims"
	refusalMustRefuse(t, dir, nil, []string{"--claim-token-secret", refusalSecret(t)}, msg)
	// The environment fallback is checked the same way.
	refusalMustRefuse(t, dir, []string{"TASKLEDGER_CLAIM_TOKEN_SECRET=" + refusalSecret(t)}, nil, msg)
	// The right secret still serves (the refusals rewrote nothing).
	refusalStart(t, dir, nil, "--claim-token-secret", good).stop()
}

func TestStartupRefusesMissingClaimSecret(t *testing.T) {
	dir := refusalSeedServerClaims(t, refusalSecret(t))
	refusalMustRefuse(t, dir, nil, nil, "server-issued claims", "--claim-token-secret is required")
}

func TestStartupRefusesReusedClaimSecret(t *testing.T) {
	for _, tc := range []struct {
		name string
		hash func(secretHex string) []byte
	}{
		{"hex text", func(s string) []byte { h := sha256.Sum256([]byte(s)); return h[:] }},
		{"decoded bytes", func(s string) []byte {
			b, _ := hex.DecodeString(s)
			h := sha256.Sum256(b)
			return h[:]
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			refusalStart(t, dir, nil).stop() // a served ledger with its initial admin token
			secret := refusalSecret(t)
			// An admin token whose value is the secret: stored, like every
			// admin token, as its SHA-256.
			st, err := ledger.Open(dir, ledger.Options{})
			if err != nil {
				t.Fatal(err)
			}
			if err := st.PutAdminToken("reused", tc.hash(secret)); err != nil {
				t.Fatal(err)
			}
			if err := st.Close(); err != nil {
				t.Fatal(err)
			}
			refusalMustRefuse(t, dir, nil, []string{"--claim-token-secret", secret}, "claim-token secret equals an admin or device token")
			// Another secret is accepted on the same ledger.
			refusalStart(t, dir, nil, "--claim-token-secret", refusalSecret(t)).stop()
		})
	}
}

func TestStartupRefusesClaimLeaseNotShorterThanAuthorizationTTLMin(t *testing.T) {
	dir := t.TempDir()
	refusalStart(t, dir, nil).stop()
	for _, args := range [][]string{
		{"--claim-lease", "15m", "--authorization-ttl-min", "15m"},
		{"--claim-lease", "20m", "--authorization-ttl-min", "15m"},
		{"--claim-lease", "30m", "--authorization-ttl-min", "29m"},
	} {
		refusalMustRefuse(t, dir, nil, args, "--claim-lease", "--authorization-ttl-min", "strictly shorter")
	}
	refusalMustRefuse(t, dir, []string{"TASKLEDGER_CLAIM_LEASE=15m"}, nil, "--claim-lease", "--authorization-ttl-min")
	// Strictly shorter is accepted.
	refusalStart(t, dir, nil, "--claim-lease", "14m", "--authorization-ttl-min", "15m").stop()
}

// A server-issued token survives a SIGKILL between the claim's commit and
// the response: the failpoint kills the process right after the batch
// holding task.claimed committed, before it is answered. After a restart
// the device replays its key, receives the token, and that token starts
// the task.
func TestServerTokenSurvivesKillBetweenCommitAndResponse(t *testing.T) {
	secret := refusalSecret(t)
	dir := t.TempDir()
	s := refusalStart(t, dir, []string{"TASKLEDGER_FAILPOINTS=kill-after-claim-commit"}, "--claim-token-secret", secret)
	dev, tok, task := s.refusalDevice()
	key, session := uuid.NewString(), uuid.NewString()
	r := s.do("POST", "/api/v1/device/tasks/claim-next", tok, refusalClaimBody(dev, session), map[string]string{"Idempotency-Key": key})
	if r.err == nil {
		t.Fatalf("the claim was answered (%d %s); the failpoint should have killed the server first", r.status, r.body)
	}
	s.wait()
	var ee *exec.ExitError
	if !errors.As(s.err, &ee) {
		t.Fatalf("serve exit: %v", s.err)
	}
	if ws, ok := ee.Sys().(syscall.WaitStatus); !ok || !ws.Signaled() || ws.Signal() != syscall.SIGKILL {
		t.Fatalf("serve did not die of SIGKILL: %v", s.err)
	}

	s2 := refusalStart(t, dir, nil, "--claim-token-secret", secret)
	replay := func() string {
		t.Helper()
		r := s2.do("POST", "/api/v1/device/tasks/claim-next", tok, refusalClaimBody(dev, session), map[string]string{"Idempotency-Key": key})
		m := s2.must(r, 200)
		if r.header.Get("Idempotent-Replayed") != "true" {
			t.Fatalf("the claim was decided again instead of replayed: %s", r.body)
		}
		if id := m["task"].(map[string]any)["id"]; id != task {
			t.Fatalf("replay names task %v, want %s", id, task)
		}
		ct, _ := m["claim"].(map[string]any)["token"].(string)
		if !regexp.MustCompile(`^[0-9a-f]{64}$`).MatchString(ct) {
			t.Fatalf("replay has no server-issued token: %s", r.body)
		}
		return ct
	}
	ct := replay()
	if again := replay(); again != ct {
		t.Fatalf("second replay token differs")
	}
	st := s2.must(s2.do("POST", "/api/v1/device/tasks/"+task+"/start", tok, map[string]any{"device_id": dev,
		"claim_generation": 1, "expected_version": 2}, map[string]string{"X-Claim-Token": ct}), 200)
	if st["state"] != "RUNNING" {
		t.Fatalf("start: %v", st)
	}
	s2.stop()

	out, err := exec.Command(proc.Taskledger(t), "verify", "--data", dir, "--claim-token-secret", secret).CombinedOutput()
	if err != nil {
		t.Fatalf("verify: %v\n%s", err, out)
	}
}
