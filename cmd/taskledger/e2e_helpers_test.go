package main_test

// Helpers of the end-to-end tests: the real taskledger binary (built once
// once per process), server processes with captured stderr, CLI runs, and a
// goroutine-safe HTTP client that reports errors instead of failing.

import (
	"bytes"
	"crypto/rand"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/google/uuid"

	"taskledger/node/nodetest"
)

// The binary is built once per test process, lazily: another test file of
// this package owns TestMain. It lives in a directory named after this
// process's pid; directories of processes that are gone are removed at the
// next build, so at most the binaries of running test processes remain.
var (
	binOnce sync.Once
	binPath string
	binErr  error
)

const binRoot = "taskledger-e2e-bins"

// taskledger returns the path of the real binary, building it on first use.
func taskledger(t testing.TB) string {
	t.Helper()
	binOnce.Do(func() {
		root := filepath.Join(os.TempDir(), binRoot)
		if ents, err := os.ReadDir(root); err == nil {
			for _, e := range ents {
				if pid, err := strconv.Atoi(e.Name()); err == nil && pid != os.Getpid() &&
					syscall.Kill(pid, 0) == syscall.ESRCH {
					os.RemoveAll(filepath.Join(root, e.Name()))
				}
			}
		}
		dir := filepath.Join(root, strconv.Itoa(os.Getpid()))
		if binErr = os.MkdirAll(dir, 0o755); binErr != nil {
			return
		}
		binPath = filepath.Join(dir, "taskledger")
		out, err := exec.Command("go", "build", "-o", binPath, ".").CombinedOutput()
		if err != nil {
			binErr = fmt.Errorf("go build: %v\n%s", err, out)
		}
	})
	if binErr != nil {
		t.Fatalf("build taskledger: %v", binErr)
	}
	return binPath
}

// cliResult is the outcome of one CLI run.
type cliResult struct {
	Stdout, Stderr string
	Code           int
}

// runCLI runs the binary with args and waits for it (bounded by a minute).
func runCLI(t testing.TB, args ...string) cliResult {
	t.Helper()
	cmd := exec.Command(taskledger(t), args...)
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	if err := cmd.Start(); err != nil {
		t.Fatalf("start %v: %v", args, err)
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	var err error
	select {
	case err = <-done:
	case <-time.After(time.Minute):
		_ = cmd.Process.Kill()
		<-done
		t.Fatalf("taskledger %v did not finish within a minute", args)
	}
	code := 0
	var ee *exec.ExitError
	if errors.As(err, &ee) {
		code = ee.ExitCode()
	} else if err != nil {
		t.Fatalf("taskledger %v: %v", args, err)
	}
	return cliResult{Stdout: out.String(), Stderr: errb.String(), Code: code}
}

// logBuffer collects a process's stderr and signals every write.
type logBuffer struct {
	mu      sync.Mutex
	buf     bytes.Buffer
	written chan struct{} // capacity 1: "something was written"
}

func newLogBuffer() *logBuffer { return &logBuffer{written: make(chan struct{}, 1)} }

func (b *logBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	n, err := b.buf.Write(p)
	b.mu.Unlock()
	select {
	case b.written <- struct{}{}:
	default:
	}
	return n, err
}

func (b *logBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// server is a running `taskledger serve` process.
type server struct {
	t      testing.TB
	cmd    *exec.Cmd
	Dir    string
	URL    string
	Stderr *logBuffer
	exited chan struct{}
	err    error // set before exited is closed
}

var listeningRE = regexp.MustCompile(`taskledger: listening on (\S+)\n`)

// startServer starts `serve --data dir --listen 127.0.0.1:0 --clock=manual`
// plus extra flags, waits for its "listening on" line and for /readyz.
func startServer(t testing.TB, dir string, extra ...string) *server {
	t.Helper()
	// The load tests drive devices far past the default per-device rate;
	// a test of the limit passes its own --device-rate after these.
	args := append([]string{"serve", "--data", dir, "--listen", "127.0.0.1:0", "--clock=manual", "--device-rate", "0"}, extra...)
	cmd := exec.Command(taskledger(t), args...)
	logs := newLogBuffer()
	cmd.Stderr = logs
	if err := cmd.Start(); err != nil {
		t.Fatalf("start serve: %v", err)
	}
	s := &server{t: t, cmd: cmd, Dir: dir, Stderr: logs, exited: make(chan struct{})}
	go func() {
		s.err = cmd.Wait()
		close(s.exited)
	}()
	t.Cleanup(func() { s.kill() })
	deadline := time.After(60 * time.Second)
	for {
		if m := listeningRE.FindStringSubmatch(logs.String()); m != nil {
			s.URL = "http://" + m[1]
			break
		}
		select {
		case <-logs.written:
		case <-s.exited:
			t.Fatalf("serve exited before listening: %v\n%s", s.err, logs.String())
		case <-deadline:
			t.Fatalf("serve did not report its address within 60s\n%s", logs.String())
		}
	}
	// The address is printed once the node is open; /readyz confirms it.
	c := &http.Client{Timeout: 5 * time.Second}
	until := time.Now().Add(30 * time.Second)
	for {
		res, err := c.Get(s.URL + "/readyz")
		if err == nil {
			res.Body.Close()
			if res.StatusCode == 200 {
				return s
			}
		}
		if time.Now().After(until) {
			t.Fatalf("serve at %s not ready within 30s: %v", s.URL, err)
		}
		select {
		case <-s.exited:
			t.Fatalf("serve exited while starting: %v\n%s", s.err, logs.String())
		case <-time.After(20 * time.Millisecond): // polling a subprocess endpoint with a deadline
		}
	}
}

// kill SIGKILLs the process (if still running) and waits for it.
func (s *server) kill() {
	select {
	case <-s.exited:
		return
	default:
	}
	_ = s.cmd.Process.Signal(syscall.SIGKILL)
	<-s.exited
}

// stop sends SIGTERM and returns the exit code (failing after 30s).
func (s *server) stop() int {
	s.t.Helper()
	_ = s.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-s.exited:
	case <-time.After(30 * time.Second):
		s.kill()
		s.t.Fatalf("serve did not stop within 30s of SIGTERM")
	}
	var ee *exec.ExitError
	if errors.As(s.err, &ee) {
		return ee.ExitCode()
	}
	if s.err != nil {
		return -1
	}
	return 0
}

// adminToken reads the initial admin token of a fresh data directory.
func adminToken(t testing.TB, dir string) string {
	t.Helper()
	raw, err := os.ReadFile(filepath.Join(dir, "initial-admin-token"))
	if err != nil {
		t.Fatalf("initial admin token: %v", err)
	}
	return strings.TrimSpace(string(raw))
}

// client sends requests; it is safe for concurrent use and never fails the
// test itself (callers in goroutines report errors).
type client struct {
	HTTP *http.Client
	// Seen, when set, receives every answer (for the secrets test).
	Seen func(method, path string, a *nodetest.Resp)
}

func newClient() *client {
	tr := &http.Transport{MaxIdleConnsPerHost: 128, MaxConnsPerHost: 0, IdleConnTimeout: 30 * time.Second}
	return &client{HTTP: &http.Client{Transport: tr, Timeout: 60 * time.Second}}
}

// do sends method base+path with a bearer token, a JSON body (nil: none;
// []byte: raw) and headers; POST/PUT get a fresh Idempotency-Key unless
// headers name one ("" removes a header).
func (c *client) do(base, method, path, token string, body any, headers map[string]string) (*nodetest.Resp, error) {
	var rd io.Reader
	switch b := body.(type) {
	case nil:
	case []byte:
		rd = bytes.NewReader(b)
	default:
		raw, err := json.Marshal(b)
		if err != nil {
			return nil, err
		}
		rd = bytes.NewReader(raw)
	}
	req, err := http.NewRequest(method, base+path, rd)
	if err != nil {
		return nil, err
	}
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	if method == "POST" || method == "PUT" {
		req.Header.Set("Idempotency-Key", uuid.NewString())
	}
	for k, v := range headers {
		if v == "" {
			req.Header.Del(k)
		} else {
			req.Header.Set(k, v)
		}
	}
	res, err := c.HTTP.Do(req)
	if err != nil {
		return nil, err
	}
	defer res.Body.Close()
	raw, err := io.ReadAll(res.Body)
	if err != nil {
		return nil, err
	}
	a := &nodetest.Resp{Status: res.StatusCode, Header: res.Header, Body: raw}
	if c.Seen != nil {
		c.Seen(method, path, a)
	}
	return a, nil
}

// presenceBody is a presence heartbeat reporting every default check true.
func presenceBody(deviceID string) map[string]any {
	return map[string]any{"device_id": deviceID, "app_version": "1.0.0", "os_version": "Android 14",
		"target_app_version": "7.1.0",
		"checks":             map[string]bool{"accessibility_connected": true, "target_app_installed": true}}
}

// newClaimToken returns a client-issued claim token (43 base64url chars).
func newClaimToken() string {
	var b [32]byte
	_, _ = rand.Read(b[:])
	return base64.RawURLEncoding.EncodeToString(b[:])
}

// num reads a JSON number as uint64.
func num(m map[string]any, k string) uint64 { f, _ := m[k].(float64); return uint64(f) }

// str reads a JSON string.
func str(m map[string]any, k string) string { s, _ := m[k].(string); return s }

// obj reads a JSON object.
func obj(m map[string]any, k string) map[string]any { o, _ := m[k].(map[string]any); return o }
