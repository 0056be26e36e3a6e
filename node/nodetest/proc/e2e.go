// Package proc runs the real taskledger server and the agent as processes
// for the client's end-to-end and crash tests: it builds the binaries,
// starts a server with the manual test clock, talks to its admin API, and
// follows a process's stderr line by line so tests wait on what the
// process says, never on sleeps.
package proc

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/google/uuid"
)

// WaitLimit bounds every wait for a line or an exit (a failsafe, not a
// pacing sleep).
const WaitLimit = 60 * time.Second

// Binaries are the built executables.
type Binaries struct {
	Server string
	Agent  string
}

// Build compiles the server (./cmd/taskledger) and the agent test main
// (with failpoints) into dir.
func Build(dir string) (Binaries, error) {
	b := Binaries{Server: filepath.Join(dir, "taskledger"), Agent: filepath.Join(dir, "agent")}
	for _, args := range [][]string{
		{"build", "-tags", "failpoints", "-o", b.Server, "./cmd/taskledger"},
		{"build", "-race", "-tags", "failpoints", "-o", b.Agent, "./client/agent/internal/testmain"},
	} {
		if err := goBuild(args...); err != nil {
			return Binaries{}, err
		}
	}
	return b, nil
}

func moduleRoot() (string, error) {
	out, err := exec.Command("go", "env", "GOMOD").Output()
	if err != nil {
		return "", err
	}
	return filepath.Dir(strings.TrimSpace(string(out))), nil
}

// Proc is a started process whose stderr is followed line by line.
type Proc struct {
	cmd   *exec.Cmd
	mu    sync.Mutex
	lines []string
	cond  *sync.Cond
	eof   bool
	done  chan struct{}
	err   error
}

// Start runs bin with args; stdout goes to stdoutW (may be nil).
func Start(t testing.TB, env []string, bin string, args ...string) *Proc {
	t.Helper()
	cmd := exec.Command(bin, args...)
	cmd.Env = append(os.Environ(), env...)
	pr, pw := io.Pipe()
	cmd.Stderr = pw
	p := &Proc{cmd: cmd, done: make(chan struct{})}
	p.cond = sync.NewCond(&p.mu)
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() {
		sc := bufio.NewScanner(pr)
		sc.Buffer(make([]byte, 64<<10), 1<<20)
		for sc.Scan() {
			p.mu.Lock()
			p.lines = append(p.lines, sc.Text())
			p.cond.Broadcast()
			p.mu.Unlock()
		}
		_, _ = io.Copy(io.Discard, pr)
		p.mu.Lock()
		p.eof = true
		p.cond.Broadcast()
		p.mu.Unlock()
	}()
	go func() {
		p.err = cmd.Wait()
		pw.Close()
		close(p.done)
	}()
	t.Cleanup(func() {
		select {
		case <-p.done:
		default:
			_ = cmd.Process.Kill()
			<-p.done
		}
	})
	return p
}

// WaitLine waits until a stderr line at index >= from contains every part;
// it returns the line and its index.
func (p *Proc) WaitLine(t testing.TB, from int, parts ...string) (string, int) {
	t.Helper()
	deadline := time.AfterFunc(WaitLimit, func() {
		p.mu.Lock()
		p.eof = true // wake the waiter; it fails below
		p.cond.Broadcast()
		p.mu.Unlock()
	})
	defer deadline.Stop()
	p.mu.Lock()
	defer p.mu.Unlock()
	for i := from; ; i++ {
		for i >= len(p.lines) {
			if p.eof {
				t.Fatalf("no stderr line with %q; got:\n%s", parts, strings.Join(p.lines, "\n"))
			}
			p.cond.Wait()
		}
		ok := true
		for _, s := range parts {
			ok = ok && strings.Contains(p.lines[i], s)
		}
		if ok {
			return p.lines[i], i
		}
	}
}

// Stderr returns everything the process wrote on stderr so far.
func (p *Proc) Stderr() string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return strings.Join(p.lines, "\n")
}

// Pid is the process id (to attach a tracer, say).
func (p *Proc) Pid() int { return p.cmd.Process.Pid }

// Signal sends sig.
func (p *Proc) Signal(sig os.Signal) { _ = p.cmd.Process.Signal(sig) }

// Wait waits for the exit and returns the exit code (-1 when killed by a
// signal).
func (p *Proc) Wait(t testing.TB) int {
	t.Helper()
	select {
	case <-p.done:
	case <-time.After(WaitLimit):
		t.Fatalf("process did not exit; stderr:\n%s", p.Stderr())
	}
	// Let the stderr reader finish.
	p.mu.Lock()
	for !p.eof {
		p.cond.Wait()
	}
	p.mu.Unlock()
	return p.cmd.ProcessState.ExitCode()
}

// Exited reports whether the process has exited.
func (p *Proc) Exited() bool {
	select {
	case <-p.done:
		return true
	default:
		return false
	}
}

// Killed reports whether the process died of SIGKILL.
func (p *Proc) Killed() bool {
	ws, ok := p.cmd.ProcessState.Sys().(syscall.WaitStatus)
	return ok && ws.Signaled() && ws.Signal() == syscall.SIGKILL
}

// Server is a running `taskledger serve` process with the manual clock.
type Server struct {
	URL   string
	Admin string // the initial admin token ("" when the directory has none)
	Data  string
	Proc  *Proc
	hc    *http.Client
}

// StartServer starts `taskledger serve --clock=manual` on a free loopback
// port with data in a temporary directory.
func StartServer(t testing.TB, bin string, args ...string) *Server {
	t.Helper()
	s := Serve(t, bin, "", args...)
	if s.Admin == "" {
		t.Fatalf("no initial admin token in %s", s.Data)
	}
	return s
}

// Serve starts `serve --data dir --listen 127.0.0.1:0 --clock=manual` plus
// args (dir "": a temporary directory), waits for its "listening on" line
// and for /readyz. At cleanup a server still running gets SIGTERM.
func Serve(t testing.TB, bin, dir string, args ...string) *Server {
	t.Helper()
	return ServeEnv(t, nil, bin, dir, append([]string{"--clock=manual"}, args...)...)
}

// ServeEnv is Serve with env added to the server's environment and
// without --clock=manual: args say which clock.
func ServeEnv(t testing.TB, env []string, bin, dir string, args ...string) *Server {
	t.Helper()
	if dir == "" {
		dir = t.TempDir()
	}
	p := Start(t, env, bin, append([]string{"serve", "--data", dir, "--listen", "127.0.0.1:0"}, args...)...)
	line, _ := p.WaitLine(t, 0, "listening on")
	addr := strings.TrimSpace(line[strings.Index(line, "listening on")+len("listening on"):])
	tok, err := os.ReadFile(filepath.Join(dir, "initial-admin-token"))
	if err != nil && !os.IsNotExist(err) {
		t.Fatal(err)
	}
	s := &Server{URL: "http://" + addr, Admin: strings.TrimSpace(string(tok)), Data: dir, Proc: p,
		hc: &http.Client{Transport: &http.Transport{Proxy: nil}}}
	t.Cleanup(func() {
		if !p.Exited() {
			p.Signal(syscall.SIGTERM)
			p.Wait(t)
		}
		s.hc.CloseIdleConnections()
	})
	s.waitReady(t)
	return s
}

// waitReady polls /readyz (the address is printed once the node is open;
// /readyz confirms it) until 200, the process exits, or WaitLimit.
func (s *Server) waitReady(t testing.TB) {
	t.Helper()
	c := &http.Client{Timeout: 5 * time.Second}
	deadline := time.After(WaitLimit)
	for {
		res, err := c.Get(s.URL + "/readyz")
		if err == nil {
			res.Body.Close()
			if res.StatusCode == 200 {
				return
			}
		}
		select {
		case <-s.Proc.done:
			t.Fatalf("serve exited while starting: %v\n%s", s.Proc.err, s.Proc.Stderr())
		case <-deadline:
			t.Fatalf("serve at %s not ready within %v: %v", s.URL, WaitLimit, err)
		case <-time.After(20 * time.Millisecond): // polling a subprocess endpoint with a deadline
		}
	}
}

// Kill SIGKILLs the server (if still running) and waits for it.
func (s *Server) Kill() {
	if !s.Proc.Exited() {
		s.Proc.Signal(syscall.SIGKILL)
		<-s.Proc.done
	}
}

// Stop sends SIGTERM and returns the exit code (-1 when killed by a
// signal), failing after WaitLimit.
func (s *Server) Stop(t testing.TB) int {
	t.Helper()
	s.Proc.Signal(syscall.SIGTERM)
	return s.Proc.Wait(t)
}

// Stderr is everything the server wrote on stderr so far.
func (s *Server) Stderr() string { return s.Proc.Stderr() }

// Do sends an admin request and decodes the JSON answer.
func (s *Server) Do(t testing.TB, method, path string, body any) (int, map[string]any) {
	t.Helper()
	var rd io.Reader
	if body != nil {
		data, _ := json.Marshal(body)
		rd = bytes.NewReader(data)
	}
	req, _ := http.NewRequest(method, s.URL+"/api/v1"+path, rd)
	req.Header.Set("Authorization", "Bearer "+s.Admin)
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Idempotency-Key", uuid.NewString())
	}
	resp, err := s.hc.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var out map[string]any
	data, _ := io.ReadAll(resp.Body)
	if len(data) > 0 {
		if err := json.Unmarshal(data, &out); err != nil {
			t.Fatalf("%s %s: %d %s", method, path, resp.StatusCode, data)
		}
	}
	return resp.StatusCode, out
}

// MustDo is Do that requires a 2xx.
func (s *Server) MustDo(t testing.TB, method, path string, body any) map[string]any {
	t.Helper()
	st, out := s.Do(t, method, path, body)
	if st/100 != 2 {
		t.Fatalf("%s %s: %d %v", method, path, st, out)
	}
	return out
}

// NewDevice registers a device requiring agent_running and returns its id
// and token.
func (s *Server) NewDevice(t testing.TB) (string, string) {
	t.Helper()
	out := s.MustDo(t, "POST", "/admin/devices", map[string]any{"owner_id": uuid.NewString(), "name": "agent",
		"required_checks": []string{"agent_running"}})
	return out["device_id"].(string), out["token"].(string)
}

// NewTask creates an authorized task and returns its id.
func (s *Server) NewTask(t testing.TB, payload map[string]any) string {
	t.Helper()
	out := s.MustDo(t, "POST", "/admin/tasks", map[string]any{"payload": payload, "authorize": map[string]any{"ttl_seconds": 3600}})
	return out["id"].(string)
}

// Task returns the task detail document.
func (s *Server) Task(t testing.TB, id string) map[string]any {
	t.Helper()
	return s.MustDo(t, "GET", "/admin/tasks/"+id, nil)
}

// Events returns every event of the log.
func (s *Server) Events(t testing.TB) []map[string]any {
	t.Helper()
	var all []map[string]any
	after := 0.0
	for {
		out := s.MustDo(t, "GET", fmt.Sprintf("/admin/events?after=%d&limit=1000", int64(after)), nil)
		evs, _ := out["events"].([]any)
		for _, e := range evs {
			all = append(all, e.(map[string]any))
		}
		if len(evs) < 1000 {
			return all
		}
		after = all[len(all)-1]["seq"].(float64)
	}
}

// Count counts events of type typ whose body names task.
func (s *Server) Count(t testing.TB, typ, task string) int {
	t.Helper()
	n := 0
	for _, e := range s.Events(t) {
		if e["type"] != typ {
			continue
		}
		if task == "" || strings.Contains(fmt.Sprint(e), task) {
			n++
		}
	}
	return n
}

// Advance moves the manual server clock.
func (s *Server) Advance(t testing.TB, seconds int) {
	t.Helper()
	s.MustDo(t, "POST", "/admin/test-clock/advance", map[string]any{"seconds": seconds})
}
