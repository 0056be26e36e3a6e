//go:build unix

package agent

import (
	"os"
	"path/filepath"
	"strconv"
	"syscall"
	"testing"

	"github.com/google/uuid"

	"taskledger/client/internal/faultproxy"
	"taskledger/node/nodetest/proc"
)

// newDefaultsWorld is a world whose device is registered with default
// settings (no required_checks: the server's defaults apply), enrolled
// with the real `taskledger agent enroll`.
func newDefaultsWorld(t *testing.T) *world {
	t.Helper()
	srv := proc.StartServer(t, bins.Server)
	out := srv.MustDo(t, "POST", "/admin/devices", map[string]any{"owner_id": uuid.NewString(), "name": "defaults"})
	id, tok := out["device_id"].(string), out["token"].(string)
	proxy := faultproxy.New(srv.URL, nil)
	t.Cleanup(proxy.Close)
	dir := t.TempDir()
	w := &world{srv: srv, proxy: proxy, dir: dir, state: filepath.Join(dir, "state"), deviceID: id, token: tok,
		runs: filepath.Join(dir, "runs")}
	tf := filepath.Join(dir, "token")
	writeFile(t, tf, tok+"\n")
	code, o, errs := proc.Run(t, bins.Server, "agent", "enroll", "--state", w.state, "--server", proxy.URL,
		"--device-id", id, "--token-file", tf, "--key-file", filepath.Join(dir, "agent.key"))
	if code != 0 {
		t.Fatalf("enroll: %d %s %s", code, o, errs)
	}
	return w
}

// The real binary, a device registered with defaults and `agent run
// --exec CMD` as docs/client.md shows it: the agent learns the required
// checks from the presence answer and claims and completes the task.
func TestAgentWithDefaultsClaims(t *testing.T) {
	w := newDefaultsWorld(t)
	task := w.task(t, "ok", 1, 0)
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	a := proc.Start(t, nil, bins.Server, "agent", "run", "--state", w.state, "--exec", strconv.Quote(self)+" "+helperArg)
	a.WaitLine(t, 0, "reporting the checks the server requires", "checks=accessibility_connected,target_app_installed")
	a.WaitLine(t, 0, "task finished", "task="+task, "outcome=SUCCEEDED")
	a.Signal(syscall.SIGTERM)
	if code := a.Wait(t); code != 0 {
		t.Fatalf("agent exit %d:\n%s", code, a.Stderr())
	}
	if d := w.srv.Task(t, task); d["state"] != "SUCCEEDED" {
		t.Fatalf("task %v", d["state"])
	}
}

// With explicit --check values that miss the device's required checks,
// the agent claims nothing and its log names what is missing.
func TestAgentNamesMissingChecks(t *testing.T) {
	w := newDefaultsWorld(t)
	w.task(t, "ok", 1, 0)
	a := proc.Start(t, nil, bins.Server, "agent", "run", "--state", w.state, "--exec", "true", "--poll", "50ms",
		"--check", "agent_running=true", "--check", "target_app_installed=true")
	a.WaitLine(t, 0, "device not claimable", "missing_checks=accessibility_connected", "--check NAME=true")
	a.Signal(syscall.SIGTERM)
	if code := a.Wait(t); code != 0 {
		t.Fatalf("agent exit %d:\n%s", code, a.Stderr())
	}
	if n := len(w.claimSeen()); n != 0 {
		t.Fatalf("%d claims while checks are missing", n)
	}
}
