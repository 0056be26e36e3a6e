package device

import (
	"context"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"taskledger/client"
	"taskledger/client/internal/faultproxy"
	"taskledger/node/nodetest/proc"
)

var bins proc.Binaries

func TestMain(m *testing.M) {
	os.Exit(proc.RunTests(m, "tl-device-test", &bins))
}

// rig is a real server, a fault proxy in front of it and an enrolled,
// open Device talking through the proxy.
type rig struct {
	srv      *proc.Server
	proxy    *faultproxy.Proxy
	dev      *Device
	dir      string
	deviceID string
	token    string
}

// plan returns action for the nth (0-based) request whose path ends with
// suffix, Pass otherwise.
type rule struct {
	suffix string
	nth    int
	action faultproxy.Action
}

func planOf(rules ...rule) func(int, *http.Request) faultproxy.Action {
	counts := map[string]int{}
	return func(_ int, r *http.Request) faultproxy.Action {
		seen := map[string]bool{}
		for _, ru := range rules {
			if !strings.HasSuffix(r.URL.Path, ru.suffix) {
				continue
			}
			if !seen[ru.suffix] {
				seen[ru.suffix] = true
				counts[ru.suffix]++
			}
			if counts[ru.suffix]-1 == ru.nth {
				return ru.action
			}
		}
		return faultproxy.Pass
	}
}

func newRig(t *testing.T, rules ...rule) *rig {
	t.Helper()
	srv := proc.StartServer(t, bins.Server)
	id, tok := srv.NewDevice(t)
	proxy := faultproxy.New(srv.URL, planOf(rules...))
	t.Cleanup(proxy.Close)
	dir := t.TempDir()
	tf := filepath.Join(dir, "token")
	if err := os.WriteFile(tf, []byte(tok+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := Enroll(EnrollOptions{StateDir: filepath.Join(dir, "state"), ServerURL: proxy.URL, DeviceID: id,
		TokenFile: tf, KeyFile: filepath.Join(dir, "agent.key")}); err != nil {
		t.Fatal(err)
	}
	os.Remove(tf)
	r := &rig{srv: srv, proxy: proxy, dir: filepath.Join(dir, "state"), deviceID: id, token: tok}
	r.open(t)
	r.presence(t)
	return r
}

func (r *rig) open(t *testing.T) {
	t.Helper()
	dev, err := Open(Options{StateDir: r.dir, ReadTimeout: 500 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	r.dev = dev
	t.Cleanup(func() { dev.Close() })
}

func (r *rig) presence(t *testing.T) {
	t.Helper()
	res, err := r.dev.Client().Heartbeat(context.Background(), client.Presence{AppVersion: "t", OSVersion: "t",
		TargetAppVersion: "t", Checks: map[string]bool{"agent_running": true}})
	if err != nil || !res.Claimable {
		t.Fatalf("presence: %+v %v", res, err)
	}
}

// claims returns the claim-next requests the proxy saw.
func (r *rig) claims() []faultproxy.Seen {
	var out []faultproxy.Seen
	for _, s := range r.proxy.Seen() {
		if strings.HasSuffix(s.Path, "/claim-next") {
			out = append(out, s)
		}
	}
	return out
}

func (r *rig) seen(suffix string) []faultproxy.Seen {
	var out []faultproxy.Seen
	for _, s := range r.proxy.Seen() {
		if strings.HasSuffix(s.Path, suffix) {
			out = append(out, s)
		}
	}
	return out
}
