package main

import (
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"taskledger/ledger/jetstream/jstest"
	"taskledger/node/nodetest/proc"
)

// TestNodesStartedTogetherAllComeUp starts three `serve --ledger` processes
// at the same moment on a fresh ledger of a three-server cluster (new
// stream, buckets and object store: each start races to create them), 20
// times in a row: every node reaches ready, and exactly one of them wrote
// the initial admin token.
func TestNodesStartedTogetherAllComeUp(t *testing.T) {
	servers := jstest.Cluster(t)
	url := jstest.URLs(servers)
	bin := proc.Taskledger(t)
	const starts, nodes = 20, 3
	began := time.Now() //tl:wallclock the loop's duration, reported
	for i := 1; i <= starts; i++ {
		name := fmt.Sprintf("RACE%d", i)
		var ns []*clusterNode
		var wg sync.WaitGroup
		var mu sync.Mutex
		for j := 0; j < nodes; j++ {
			wg.Add(1)
			go func() {
				defer wg.Done()
				n := startClusterNode(t, bin, url, "--nats-name", name)
				mu.Lock()
				ns = append(ns, n)
				mu.Unlock()
			}()
		}
		wg.Wait()
		tokens := 0
		for _, n := range ns {
			n.waitReady(t, 60*time.Second)
			if _, err := os.Stat(filepath.Join(n.data, "initial-admin-token")); err == nil {
				tokens++
			}
		}
		if tokens != 1 {
			t.Fatalf("start %d: %d nodes wrote an initial admin token, want 1", i, tokens)
		}
		for _, n := range ns {
			n.stop(t)
		}
	}
	t.Logf("%d starts of %d nodes together, all ready, in %v", starts, nodes, time.Since(began).Round(time.Millisecond))
}

// TestServeStartedBeforeNATSComesUp: a node started before any NATS server
// listens answers /healthz 200 and /readyz 503, logs what it waits for, and
// becomes ready once the servers are up.
func TestServeStartedBeforeNATSComesUp(t *testing.T) {
	ports := jstest.FreePorts(t, 3)
	var urls []string
	for _, p := range ports {
		urls = append(urls, fmt.Sprintf("nats://127.0.0.1:%d", p))
	}
	bin := proc.Taskledger(t)
	n := startClusterNode(t, bin, strings.Join(urls, ","), "--start-timeout", "2m")
	n.p.WaitLine(t, 0, "waiting for the NATS servers")
	if code := n.readyz(); code != http.StatusServiceUnavailable {
		t.Fatalf("/readyz before NATS is up: %d, want 503", code)
	}
	res, err := http.Get(n.url + "/healthz")
	if err != nil {
		t.Fatal(err)
	}
	res.Body.Close()
	if res.StatusCode != http.StatusOK {
		t.Fatalf("/healthz while waiting: %d, want 200", res.StatusCode)
	}
	res, err = http.Get(n.url + "/api/v1/admin/tasks")
	if err != nil {
		t.Fatal(err)
	}
	res.Body.Close()
	if res.StatusCode != http.StatusServiceUnavailable || res.Header.Get("Retry-After") != "1" {
		t.Fatalf("an API route while waiting: %d, Retry-After %q; want 503, 1", res.StatusCode, res.Header.Get("Retry-After"))
	}
	jstest.ClusterAt(t, ports)
	n.waitReady(t, 90*time.Second)
	createTaskID(t, n)
	if r := proc.Exec(t, bin, "status", "--ledger", strings.Join(urls, ",")); r.Code != 0 || strings.Count(r.Stdout, "replicas 3 ") != 5 {
		t.Fatalf("status: %d\n%s%s", r.Code, r.Stdout, r.Stderr)
	}
}

// TestServeGivesUpAtTheStartTimeout: no NATS server comes up; the node
// exits 1 after --start-timeout, naming what it waited for.
func TestServeGivesUpAtTheStartTimeout(t *testing.T) {
	port := jstest.FreePorts(t, 1)[0]
	n := startClusterNode(t, proc.Taskledger(t), fmt.Sprintf("nats://127.0.0.1:%d", port), "--start-timeout", "1s")
	if code := n.p.Wait(t); code != 1 || !strings.Contains(n.p.Stderr(), "not ready within the start timeout") {
		t.Fatalf("serve with no NATS server: exit %d\n%s", code, n.p.Stderr())
	}
}
