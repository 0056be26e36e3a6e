package main

import (
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/nats-io/nats.go"
	natsjs "github.com/nats-io/nats.go/jetstream"

	"taskledger/ledger/jetstream/jstest"
	"taskledger/node/nodetest/proc"
)

// clusterNode is a `taskledger serve --ledger` process on a loopback port.
type clusterNode struct {
	p         *proc.Proc
	url, data string
}

// startClusterNode starts `serve --ledger natsURL` plus args on a free
// loopback port it advertises; it does not wait for anything.
func startClusterNode(t *testing.T, bin, natsURL string, args ...string) *clusterNode {
	t.Helper()
	addr := fmt.Sprintf("127.0.0.1:%d", jstest.FreePorts(t, 1)[0])
	dir := t.TempDir()
	p := proc.Start(t, nil, bin, append([]string{"serve", "--data", dir, "--listen", addr, "--ledger", natsURL,
		"--advertise", "http://" + addr, "--lease-ttl", "1s", "--device-rate", "0"}, args...)...)
	t.Cleanup(func() {
		if !p.Exited() {
			p.Signal(syscall.SIGTERM)
			p.Wait(t)
		}
	})
	return &clusterNode{p: p, url: "http://" + addr, data: dir}
}

// readyz is the node's /readyz status (0 when nothing answers).
func (n *clusterNode) readyz() int {
	c := &http.Client{Timeout: 2 * time.Second}
	res, err := c.Get(n.url + "/readyz")
	if err != nil {
		return 0
	}
	res.Body.Close()
	return res.StatusCode
}

// waitReady waits until /readyz answers 200; the node exiting fails.
func (n *clusterNode) waitReady(t *testing.T, bound time.Duration) {
	t.Helper()
	jstest.Eventually(t, bound, "the node is ready", func() error {
		if n.p.Exited() {
			t.Fatalf("the node exited while starting:\n%s", n.p.Stderr())
		}
		if code := n.readyz(); code != http.StatusOK {
			return fmt.Errorf("/readyz %d", code)
		}
		return nil
	})
}

// createTaskID creates a task through the node (its initial admin token)
// and returns its id.
func createTaskID(t *testing.T, n *clusterNode) string {
	t.Helper()
	tok := readToken(t, n)
	var id string
	key := uuid.NewString()
	jstest.Eventually(t, 20*time.Second, "a task is created", func() error {
		r, err := proc.NewClient().Do(n.url, "POST", "/api/v1/admin/tasks", tok,
			map[string]any{"payload": map[string]any{"n": 1}, "authorize": map[string]any{"ttl_seconds": 3600}},
			map[string]string{"Idempotency-Key": key})
		if err != nil || r.Status != http.StatusCreated {
			return fmt.Errorf("%v %v", r, err)
		}
		id, _ = r.JSON()["id"].(string)
		return nil
	})
	return id
}

// readToken reads the initial admin token the node wrote.
func readToken(t *testing.T, n *clusterNode) string {
	t.Helper()
	tok, err := os.ReadFile(filepath.Join(n.data, "initial-admin-token"))
	if err != nil {
		t.Fatalf("no initial admin token: %v", err)
	}
	return strings.TrimSpace(string(tok))
}

// stop sends SIGTERM and waits for the exit.
func (n *clusterNode) stop(t *testing.T) {
	t.Helper()
	n.p.Signal(syscall.SIGTERM)
	n.p.Wait(t)
}

// clusterConfigs is every stream's configuration on the cluster (the
// events stream and the streams behind the buckets and the object store).
func clusterConfigs(t *testing.T, url string) map[string]natsjs.StreamConfig {
	t.Helper()
	nc, err := nats.Connect(url)
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	js, err := natsjs.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]natsjs.StreamConfig{}
	l := js.ListStreams(t.Context())
	for info := range l.Info() {
		out[info.Config.Name] = info.Config
	}
	if l.Err() != nil {
		t.Fatal(l.Err())
	}
	return out
}

// TestClusterCommandsOfTheDocsChangeNoConfiguration runs every command of
// the operations guide's cluster section, as written there, through the
// real binary against a live three-server cluster whose resources serve
// created R3 (no flag): no stream, bucket or object store configuration
// changes, and each read-only command reports or refuses instead.
func TestClusterCommandsOfTheDocsChangeNoConfiguration(t *testing.T) {
	servers := jstest.Cluster(t)
	url := jstest.URLs(servers)
	bin := proc.Taskledger(t)
	dir, _ := reviewLedger(t)

	// migrate (creates: R3 by default on three servers) into MIG; a node
	// (creates the same) on TASKLEDGER, with one task.
	if r := proc.Exec(t, bin, "migrate", "--data", dir, "--ledger", url, "--nats-name", "MIG"); r.Code != 0 {
		t.Fatalf("migrate: %d %s", r.Code, r.Stderr)
	}
	n := startClusterNode(t, bin, url)
	n.waitReady(t, 30*time.Second)
	task := createTaskID(t, n)
	before := clusterConfigs(t, url)
	for _, name := range []string{"TASKLEDGER_EVENTS", "KV_TASKLEDGER_SOFT", "KV_TASKLEDGER_META", "KV_TASKLEDGER_LEASE",
		"OBJ_TASKLEDGER_BLOBS", "MIG_EVENTS", "KV_MIG_SOFT", "KV_MIG_META"} {
		if c, ok := before[name]; !ok || c.Replicas != 3 {
			t.Fatalf("%s: present %v, replicas %d; want R3 without --nats-replicas", name, ok, c.Replicas)
		}
	}
	for _, c := range []struct {
		args []string
		code int
		want []string
	}{
		{[]string{"verify", "--ledger", url}, 0, []string{"ok: ", "TASKLEDGER_SOFT", "replicas 3"}},
		{[]string{"export", "--ledger", url}, 0, []string{`"seq":1,`}},
		{[]string{"export", "--ledger", url, "--after", "0"}, 0, []string{`"seq":1,`}},
		{[]string{"history", task, "--ledger", url}, 0, []string{"task " + task}},
		{[]string{"status", "--ledger", url}, 0, []string{"TASKLEDGER_EVENTS", "TASKLEDGER_LEASE", "TASKLEDGER_BLOBS", "replicas 3 (3 current"}},
		{[]string{"verify", "--ledger", servers[1].ClientURL(), "--nats-replicas", "3"}, 0, []string{"ok: "}},
		// Asked for other replicas: refused, naming both; nothing changed.
		{[]string{"verify", "--ledger", url, "--nats-replicas", "1"}, 1, []string{"replicas 3", "replicas 1", "nothing was changed"}},
		{[]string{"export", "--ledger", url, "--nats-replicas", "1"}, 1, []string{"replicas 3", "replicas 1"}},
		{[]string{"migrate", "--data", dir, "--ledger", url, "--nats-name", "MIG"}, 1, []string{"not empty"}},
		{[]string{"migrate", "--data", dir, "--ledger", url, "--nats-name", "MIG", "--nats-replicas", "1"}, 1, []string{"replicas 3", "replicas 1"}},
		{[]string{"verify", "--ledger", url, "--nats-name", "MIG"}, 0, []string{"ok: ", "MIG_META"}},
		// A read-only command on a ledger that does not exist creates nothing.
		{[]string{"verify", "--ledger", url, "--nats-name", "NONE"}, 1, []string{"does not exist"}},
	} {
		r := proc.Exec(t, bin, c.args...)
		out := r.Stdout + r.Stderr
		if r.Code != c.code {
			t.Errorf("%v: exit %d, want %d\n%s", c.args, r.Code, c.code, out)
			continue
		}
		for _, w := range c.want {
			if !strings.Contains(out, w) {
				t.Errorf("%v: %q not in\n%s", c.args, w, out)
			}
		}
	}
	// A node asking for R1 on the R3 resources is refused, naming both.
	r1 := startClusterNode(t, bin, url, "--nats-replicas", "1")
	if code := r1.p.Wait(t); code != 1 || !strings.Contains(r1.p.Stderr(), "replicas 3") || !strings.Contains(r1.p.Stderr(), "replicas 1") {
		t.Fatalf("serve --nats-replicas 1 on R3 resources: exit %d\n%s", code, r1.p.Stderr())
	}
	n.stop(t)
	if after := clusterConfigs(t, url); !reflect.DeepEqual(before, after) {
		for name := range before {
			if !reflect.DeepEqual(before[name], after[name]) {
				t.Errorf("%s changed:\nbefore %+v\nafter  %+v", name, before[name], after[name])
			}
		}
		t.Fatalf("configurations changed (%d streams before, %d after)", len(before), len(after))
	}
}

// TestR1OnAClusterNeedsTheFlagAndWarns: with --nats-replicas 1 on three
// servers, serve creates R1 resources and warns at every start; status
// reports them with a warning.
func TestR1OnAClusterNeedsTheFlagAndWarns(t *testing.T) {
	servers := jstest.Cluster(t)
	url := jstest.URLs(servers)
	bin := proc.Taskledger(t)
	for start := 1; start <= 2; start++ {
		n := startClusterNode(t, bin, url, "--nats-replicas", "1", "--nats-name", "ONE")
		n.waitReady(t, 30*time.Second)
		n.stop(t)
		if !strings.Contains(n.p.Stderr(), "one server holds the whole ledger") {
			t.Fatalf("start %d: no warning about R1 on three servers:\n%s", start, n.p.Stderr())
		}
	}
	r := proc.Exec(t, bin, "status", "--ledger", url, "--nats-name", "ONE")
	if r.Code != 0 || strings.Count(r.Stdout, "replicas 1 ") != 5 || !strings.Contains(r.Stdout, "warning: stream ONE_EVENTS has 1 replica") {
		t.Fatalf("status of R1 resources: %d\n%s%s", r.Code, r.Stdout, r.Stderr)
	}
	// Without the flag the next start asks for R3 and is refused.
	n := startClusterNode(t, bin, url, "--nats-name", "ONE")
	if code := n.p.Wait(t); code != 1 || !strings.Contains(n.p.Stderr(), "exists with replicas 1") {
		t.Fatalf("serve without --nats-replicas on R1 resources: exit %d\n%s", code, n.p.Stderr())
	}
	if _, err := os.Stat(filepath.Join(n.data, "initial-admin-token")); !os.IsNotExist(err) {
		t.Fatalf("the refused node wrote an initial admin token (%v)", err)
	}
}
