package main

import (
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/google/uuid"

	"taskledger/ledger/jetstream/jstest"
	"taskledger/node/nodetest/proc"
)

// clusterServe starts `taskledger serve --ledger URL` on a free loopback
// port it advertises, and waits for its "listening on" line.
func clusterServe(t *testing.T, bin, natsURL string) (*proc.Proc, string, string) {
	t.Helper()
	port := jstest.FreePorts(t, 1)[0]
	addr := fmt.Sprintf("127.0.0.1:%d", port)
	dir := t.TempDir()
	p := proc.Start(t, nil, bin, "serve", "--data", dir, "--listen", addr, "--ledger", natsURL,
		"--nats-replicas", "3", "--advertise", "http://"+addr, "--lease-ttl", "1s", "--device-rate", "0")
	p.WaitLine(t, 0, "listening on")
	t.Cleanup(func() {
		if !p.Exited() {
			p.Signal(syscall.SIGTERM)
			p.Wait(t)
		}
	})
	return p, "http://" + addr, dir
}

func createTaskAt(url, admin string) (int, error) {
	req, _ := http.NewRequest("POST", url+"/api/v1/admin/tasks", strings.NewReader(
		`{"payload":{"n":1},"authorize":{"ttl_seconds":3600}}`))
	req.Header.Set("Authorization", "Bearer "+admin)
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Idempotency-Key", uuid.NewString())
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		return 0, err
	}
	res.Body.Close()
	return res.StatusCode, nil
}

// TestServeOnAClusterSurvivesSIGKILLOfTheSequencer: two `serve --ledger`
// processes on a three-server NATS cluster. The first initializes the
// stream (it alone writes initial-admin-token); a command sent to the
// second is forwarded; after SIGKILL of the first, the second takes the
// lease and commands succeed again; `verify --ledger` passes.
func TestServeOnAClusterSurvivesSIGKILLOfTheSequencer(t *testing.T) {
	servers := jstest.Cluster(t)
	url := jstest.URLs(servers)
	bin := proc.Taskledger(t)
	first, firstURL, firstDir := clusterServe(t, bin, url)
	tok, err := os.ReadFile(filepath.Join(firstDir, "initial-admin-token"))
	if err != nil {
		t.Fatalf("the first node wrote no initial admin token: %v\n%s", err, first.Stderr())
	}
	admin := strings.TrimSpace(string(tok))
	jstest.Eventually(t, 20*time.Second, "the first node sequences", func() error {
		code, err := createTaskAt(firstURL, admin)
		if err != nil || code != http.StatusCreated {
			return fmt.Errorf("%d %v", code, err)
		}
		return nil
	})
	second, secondURL, secondDir := clusterServe(t, bin, url)
	if _, err := os.Stat(filepath.Join(secondDir, "initial-admin-token")); !os.IsNotExist(err) {
		t.Fatalf("the second node wrote an initial admin token too (%v)", err)
	}
	jstest.Eventually(t, 20*time.Second, "the second node forwards", func() error {
		code, err := createTaskAt(secondURL, admin)
		if err != nil || code != http.StatusCreated {
			return fmt.Errorf("%d %v", code, err)
		}
		return nil
	})
	first.Signal(syscall.SIGKILL)
	first.Wait(t)
	killed := time.Now()
	jstest.Eventually(t, 20*time.Second, "the second node takes over", func() error {
		code, err := createTaskAt(secondURL, admin)
		if err != nil || code != http.StatusCreated {
			return fmt.Errorf("%d %v", code, err)
		}
		return nil
	})
	t.Logf("the second node acknowledged a command %v after SIGKILL of the sequencer", time.Since(killed).Round(time.Millisecond))
	v := reviewCLI("verify", "--ledger", url)
	if v.code != 0 || !strings.HasPrefix(v.stdout, "ok: ") {
		t.Fatalf("verify --ledger: %d %q %q", v.code, v.stdout, v.stderr)
	}
	if !strings.Contains(second.Stderr(), "sequencing") {
		t.Fatalf("the second node never logged that it sequences:\n%s", second.Stderr())
	}
}

// TestServeLedgerRefusesAnIncompleteClusterConfiguration: --ledger without
// --advertise, with --clock=manual, or with a lease TTL out of bounds is
// refused before anything listens.
func TestServeLedgerRefusesAnIncompleteClusterConfiguration(t *testing.T) {
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"--ledger", "nats://127.0.0.1:1"}, "--advertise"},
		{[]string{"--ledger", "nats://127.0.0.1:1", "--advertise", "http://127.0.0.1:9", "--clock=manual"}, "--clock=manual is refused"},
		{[]string{"--ledger", "nats://127.0.0.1:1", "--advertise", "http://127.0.0.1:9", "--lease-ttl", "100ms"}, "--lease-ttl"},
		{[]string{"--ledger", "nats://127.0.0.1:1", "--advertise", "http://127.0.0.1:9", "--start-timeout", "500ms"}, "--start-timeout"},
		{[]string{"--ledger", "nats://127.0.0.1:1", "--advertise", "http://127.0.0.1:9", "--start-timeout", "2h"}, "--start-timeout"},
		{[]string{"--ledger", "nats://127.0.0.1:1", "--advertise", "http://127.0.0.1:9", "--start-timeout", "soon"}, "--start-timeout"},
	} {
		r := reviewCLI(append([]string{"serve", "--data", t.TempDir(), "--listen", "127.0.0.1:0"}, c.args...)...)
		if r.code != 1 || !strings.Contains(r.stderr, c.want) {
			t.Errorf("serve %v: %d %q, want exit 1 naming %q", c.args, r.code, r.stderr, c.want)
		}
	}
	t.Setenv("TASKLEDGER_START_TIMEOUT", "0s")
	r := reviewCLI("serve", "--data", t.TempDir(), "--listen", "127.0.0.1:0", "--ledger", "nats://127.0.0.1:1", "--advertise", "http://127.0.0.1:9")
	if r.code != 1 || !strings.Contains(r.stderr, "--start-timeout") {
		t.Errorf("TASKLEDGER_START_TIMEOUT=0s: %d %q, want exit 1 naming --start-timeout", r.code, r.stderr)
	}
}
