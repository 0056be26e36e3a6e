package node_test

import (
	"errors"
	"net/http"
	"sync/atomic"
	"testing"
	"time"

	"taskledger/commands"
	"taskledger/ledger"
	"taskledger/ledger/jetstream/jstest"
	"taskledger/node"
	"taskledger/node/nodetest"
)

// failOnce fails the appends it is armed for, as a full or failing disk
// does, and passes the others through.
type failOnce struct {
	inner commands.Log
	arm   atomic.Bool
}

func (f *failOnce) Append(b *ledger.Batch) error {
	if f.arm.CompareAndSwap(true, false) {
		return errors.New("failOnce: no space left on device")
	}
	return f.inner.Append(b)
}

// The series operators alert on: queue depth, readiness, the cluster role,
// the snapshot's lag, the disk, commits and their failures, tasks by state.
func TestMetricsOperatorsAlertOn(t *testing.T) {
	fl := &failOnce{}
	n := nodetest.Start(t, func(c *node.Config) {
		c.WrapLog = func(l commands.Log) commands.Log { fl.inner = l; return fl }
	})
	m := scrape(t, n)
	for name, want := range map[string]float64{"taskledger_tasks_claimable": 0, "taskledger_ready": 1,
		"taskledger_commit_failures_total": 0, "taskledger_snapshot_events_behind": 0} {
		if got := sampleValue(m, name, nil); got != want {
			t.Errorf("%s = %v at start, want %v", name, got, want)
		}
	}
	for role, want := range map[string]float64{"standalone": 1, "sequencer": 0, "follower": 0, "promoting": 0} {
		if got := sampleValue(m, "taskledger_cluster_role", map[string]string{"role": role}); got != want {
			t.Errorf("taskledger_cluster_role{role=%q} = %v, want %v", role, got, want)
		}
	}
	if free, size := sampleValue(m, "taskledger_disk_free_bytes", nil), sampleValue(m, "taskledger_disk_size_bytes", nil); free <= 0 || size < free {
		t.Errorf("disk: free %v of %v bytes", free, size)
	}

	// Two authorized tasks and one not: the queue is two deep; a claim
	// takes one.
	n.CreateTaskFor(t, map[string]any{"a": 1}, time.Hour)
	n.CreateTaskFor(t, map[string]any{"b": 1}, time.Hour)
	n.CreateTaskFor(t, map[string]any{"unauthorized": true}, 0)
	m = scrape(t, n)
	if got := sampleValue(m, "taskledger_tasks_claimable", nil); got != 2 {
		t.Errorf("claimable %v, want 2", got)
	}
	if got := sampleValue(m, "taskledger_tasks", map[string]string{"state": "PENDING"}); got != 3 {
		t.Errorf("PENDING tasks %v, want 3", got)
	}
	d := n.RegisterDevice()
	nodetest.Must(t, d.Ready(), http.StatusOK)
	r, _ := d.Claim()
	nodetest.Must(t, r, http.StatusOK)
	m = scrape(t, n)
	if got := sampleValue(m, "taskledger_tasks_claimable", nil); got != 1 {
		t.Errorf("claimable after a claim %v, want 1", got)
	}
	behind := sampleValue(m, "taskledger_snapshot_events_behind", nil)
	if behind != float64(n.Head()) {
		t.Errorf("snapshot events behind %v, want the head %d (no snapshot yet)", behind, n.Head())
	}
	commits := sampleValue(m, "taskledger_append_commit_seconds_count", nil)

	// A failed commit: counted, answered 503, and readiness follows the
	// storage (a probe of the data directory succeeds, so it is ready).
	fl.arm.Store(true)
	if r := n.Do("POST", "/api/v1/admin/tasks", n.AdminToken, map[string]any{"payload": map[string]any{"lost": true}}, nil); r.Status != http.StatusServiceUnavailable {
		t.Fatalf("a failed commit answered %d", r.Status)
	}
	m = scrape(t, n)
	if got := sampleValue(m, "taskledger_commit_failures_total", nil); got != 1 {
		t.Errorf("commit failures %v, want 1", got)
	}
	if got := sampleValue(m, "taskledger_append_commit_seconds_count", nil); got != commits {
		t.Errorf("a failed commit counted as a commit: %v, was %v", got, commits)
	}

	// A snapshot brings the lag back to 0.
	if _, err := n.Snapshot(); err != nil {
		t.Fatal(err)
	}
	if got := sampleValue(scrape(t, n), "taskledger_snapshot_events_behind", nil); got != 0 {
		t.Errorf("events behind after a snapshot %v, want 0", got)
	}
}

// On a cluster, taskledger_cluster_role says which node sequences and
// which follow (what the no-sequencer alert sums).
func TestClusterRoleMetric(t *testing.T) {
	nodes := startNodes(t, jstest.URLs(jstest.Cluster(t)), 2)
	for i, want := range []string{"sequencer", "follower"} {
		m := scrape(t, nodes[i])
		for _, role := range []string{"standalone", "follower", "promoting", "sequencer"} {
			v := 0.0
			if role == want {
				v = 1
			}
			if got := sampleValue(m, "taskledger_cluster_role", map[string]string{"role": role}); got != v {
				t.Errorf("node %d (%s): taskledger_cluster_role{role=%q} = %v", i, want, role, got)
			}
		}
	}
}
