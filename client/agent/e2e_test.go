//go:build unix

package agent

import (
	"encoding/json"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"testing"

	"taskledger/client/internal/faultproxy"
	"taskledger/client/localstate"
	"taskledger/node/nodetest/proc"
)

// world is a real server, a recording proxy, and an enrolled agent state.
type world struct {
	srv      *proc.Server
	proxy    *faultproxy.Proxy
	dir      string // scratch
	state    string
	deviceID string
	token    string
	runs     string
}

func newWorld(t *testing.T) *world {
	t.Helper()
	return newWorldPlan(t, nil)
}

// newWorldPlan is newWorld with a fault plan on the proxy.
func newWorldPlan(t *testing.T, plan func(int, *http.Request) faultproxy.Action) *world {
	t.Helper()
	srv := proc.StartServer(t, bins.Server)
	id, tok := srv.NewDevice(t)
	proxy := faultproxy.New(srv.URL, plan)
	t.Cleanup(proxy.Close)
	dir := t.TempDir()
	w := &world{srv: srv, proxy: proxy, dir: dir, state: filepath.Join(dir, "state"), deviceID: id, token: tok,
		runs: filepath.Join(dir, "runs")}
	tf := filepath.Join(dir, "token")
	os.WriteFile(tf, []byte(tok+"\n"), 0o600)
	// Flags after and before the subcommand's words, in any order.
	code, out, errs := proc.Run(t, bins.Agent, "enroll", "--state", w.state, "--server", proxy.URL,
		"--device-id", id, "--token-file", tf, "--key-file", filepath.Join(dir, "agent.key"))
	if code != 0 {
		t.Fatalf("enroll: %d %s %s", code, out, errs)
	}
	os.Remove(tf)
	return w
}

func (w *world) task(t *testing.T, mode string, n, code int) string {
	t.Helper()
	return w.srv.NewTask(t, map[string]any{"mode": mode, "n": n, "code": code, "runs": w.runs})
}

// run starts `agent run` with the test binary as the work command.
func (w *world) run(t *testing.T, env ...string) *proc.Proc {
	t.Helper()
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	return proc.Start(t, env, bins.Agent, "run", "--state", w.state, "--exec", strconv.Quote(self)+" "+helperArg,
		"--poll", "50ms", "--heartbeat", "100ms")
}

func (w *world) runCount(t *testing.T) int {
	t.Helper()
	data, _ := os.ReadFile(w.runs)
	return strings.Count(string(data), "\n")
}

func (w *world) status(t *testing.T) map[string]any {
	t.Helper()
	code, out, errs := proc.Run(t, bins.Agent, "status", "--json", "--state", w.state)
	if code != 0 {
		t.Fatalf("status: %d %s", code, errs)
	}
	var m map[string]any
	if err := json.Unmarshal([]byte(out), &m); err != nil {
		t.Fatal(err)
	}
	return m
}

func stateOf(t *testing.T, w *world, id string) map[string]any {
	t.Helper()
	return w.srv.Task(t, id)
}

// `agent run --exec` end to end: three tasks complete, one fails with its
// exit code, one is canceled while it runs and acknowledged. No token is
// found in the state, the logs or the errors; a second agent is refused.
func TestRunEndToEnd(t *testing.T) {
	w := newWorld(t)
	ok1 := w.task(t, "ok", 1, 0)
	ok2 := w.task(t, "ok", 2, 0)
	bad := w.task(t, "exit", 3, 7)
	ok3 := w.task(t, "ok", 4, 0)
	block := w.task(t, "block", 5, 0)
	a := w.run(t)
	a.WaitLine(t, 0, "agent started")

	// A second agent on the same state exits non-zero with a clear message.
	code, _, errs := proc.Run(t, bins.Agent, "run", "--state", w.state, "--exec", "true")
	if code == 0 || !strings.Contains(errs, "is in use by another agent") {
		t.Fatalf("second agent: %d %q", code, errs)
	}

	for _, id := range []string{ok1, ok2, bad, ok3} {
		a.WaitLine(t, 0, "task finished", "task="+id)
	}
	a.WaitLine(t, 0, "work launched", "task="+block)
	a.WaitLine(t, 0, "helper running mode=block") // it has counted its run
	w.srv.MustDo(t, "POST", "/admin/tasks/"+block+"/cancel", map[string]any{"reason": "operator stop"})
	a.WaitLine(t, 0, "task finished", "task="+block, "outcome=CANCELED")
	_, idle := a.WaitLine(t, 0, "no task")
	a.Signal(syscall.SIGTERM)
	if code := a.Wait(t); code != 0 {
		t.Fatalf("agent exit %d:\n%s", code, a.Stderr())
	}
	_ = idle

	for i, id := range []string{ok1, ok2, ok3} {
		d := stateOf(t, w, id)
		res, _ := json.Marshal(d["result"])
		if d["state"] != "SUCCEEDED" || string(res) != `{"ok":`+strconv.Itoa([]int{1, 2, 4}[i])+`}` {
			t.Fatalf("task %s: %v %s", id, d["state"], res)
		}
	}
	if d := stateOf(t, w, bad); d["state"] != "FAILED" || d["failure"].(map[string]any)["reason_code"] != "exit_7" {
		t.Fatalf("failed task: %v", d)
	}
	if d := stateOf(t, w, block); d["state"] != "CANCELED" {
		t.Fatalf("canceled task: %v", d["state"])
	}
	if n := w.runCount(t); n != 5 {
		t.Fatalf("%d runs", n)
	}

	// Grep the state file, the agent's and the server's logs, and status
	// for the device token and every claim token that went over the wire.
	secrets := []string{w.token}
	for _, s := range w.proxy.Seen() {
		if s.ClaimToken != "" {
			secrets = append(secrets, s.ClaimToken)
		}
	}
	if len(secrets) < 6 {
		t.Fatalf("expected claim tokens on the wire, got %d secrets", len(secrets))
	}
	_, statusOut, _ := proc.Run(t, bins.Agent, "status", "--state", w.state)
	haystacks := map[string]string{"agent log": a.Stderr(), "server log": w.srv.Proc.Stderr(), "status": statusOut}
	files, _ := filepath.Glob(filepath.Join(w.state, "*"))
	for _, f := range files {
		data, _ := os.ReadFile(f)
		haystacks[f] = string(data)
	}
	for name, h := range haystacks {
		for _, s := range secrets {
			if strings.Contains(h, s) {
				t.Fatalf("a token appears in %s", name)
			}
		}
	}

	// A flipped byte in the sealed device token: clear error, no request.
	before := len(w.proxy.Seen())
	st, err := localstate.Open(w.state)
	if err != nil {
		t.Fatal(err)
	}
	s, _ := st.Load()
	s.Identity.SealedToken[len(s.Identity.SealedToken)-3] ^= 0x40
	st.Apply(localstate.Change{Identity: s.Identity})
	st.Close()
	code, _, errs = proc.Run(t, bins.Agent, "run", "--state", w.state, "--exec", "true")
	if code == 0 || !strings.Contains(errs, "cannot decrypt") || len(w.proxy.Seen()) != before {
		t.Fatalf("damaged token: exit %d, %q, %d requests", code, errs, len(w.proxy.Seen())-before)
	}
	for _, sec := range secrets {
		if strings.Contains(errs, sec) {
			t.Fatal("token in the error")
		}
	}
}

var pidRE = regexp.MustCompile(`pid=([0-9]+)`)

// killWork kills the work command the agent reported launching.
func killWork(t *testing.T, line string) {
	t.Helper()
	m := pidRE.FindStringSubmatch(line)
	if m == nil {
		t.Fatalf("no pid in %q", line)
	}
	pid, _ := strconv.Atoi(m[1])
	t.Cleanup(func() { _ = syscall.Kill(pid, syscall.SIGKILL) })
}

func writeFile(t *testing.T, path, s string) {
	t.Helper()
	if err := os.WriteFile(path, []byte(s), 0o600); err != nil {
		t.Fatal(err)
	}
}
