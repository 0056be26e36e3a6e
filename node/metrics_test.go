package node_test

import (
	"strconv"
	"strings"
	"testing"
	"time"

	"taskledger/node/nodetest"
)

// scrape reads /metrics (no token) and returns the text exposition.
func scrape(t *testing.T, n *nodetest.Node) string {
	t.Helper()
	r := n.Do("GET", "/metrics", "", nil, nil)
	nodetest.Must(t, r, 200)
	return string(r.Body)
}

// sampleValue returns the value of the sample name{labels} (every label
// given must match; others may exist), or -1 when there is none.
func sampleValue(text, name string, labels map[string]string) float64 {
	for _, line := range strings.Split(text, "\n") {
		if line == "" || line[0] == '#' {
			continue
		}
		sp := strings.LastIndexByte(line, ' ')
		if sp < 0 {
			continue
		}
		metric, val := line[:sp], line[sp+1:]
		lbl := ""
		if i := strings.IndexByte(metric, '{'); i >= 0 {
			metric, lbl = metric[:i], metric[i:]
		}
		if metric != name {
			continue
		}
		ok := true
		for k, v := range labels {
			ok = ok && strings.Contains(lbl, k+`="`+v+`"`)
		}
		if !ok {
			continue
		}
		f, err := strconv.ParseFloat(val, 64)
		if err != nil {
			return -1
		}
		return f
	}
	return -1
}

// TestMetricsSeriesPresentAndMoving scrapes /metrics and checks the series
// of api.md and operations.md are there and move when commands run.
func TestMetricsSeriesPresentAndMoving(t *testing.T) {
	n := nodetest.Start(t)
	m0 := scrape(t, n)
	for _, name := range []string{"taskledger_append_batch_size", "taskledger_append_commit_seconds",
		"taskledger_claims_total", "taskledger_replay_seconds", "taskledger_snapshot_seconds",
		"taskledger_lease_expiries_total"} {
		if !strings.Contains(m0, "# TYPE "+name+" ") {
			t.Errorf("/metrics has no %s", name)
		}
	}
	if sampleValue(m0, "taskledger_replay_seconds", nil) < 0 {
		t.Error("no taskledger_replay_seconds sample")
	}
	batches0 := sampleValue(m0, "taskledger_append_batch_size_count", nil)
	commits0 := sampleValue(m0, "taskledger_append_commit_seconds_count", nil)
	claims0 := sampleValue(m0, "taskledger_claims_total", nil)
	claimExp0 := sampleValue(m0, "taskledger_lease_expiries_total", map[string]string{"lease": "claim"})
	runExp0 := sampleValue(m0, "taskledger_lease_expiries_total", map[string]string{"lease": "running"})
	if claimExp0 != 0 || runExp0 != 0 {
		t.Fatalf("lease expiries at start: %v %v", claimExp0, runExp0)
	}

	a, b := n.RegisterDevice(), n.RegisterDevice()
	work(t, n, a)
	// A refused command is counted by its error code.
	id := n.CreateTask(nil)
	nodetest.Must(t, a.Ready(), 200)
	r, tok := a.Claim()
	nodetest.Must(t, r, 200)
	nodetest.Must(t, a.Call(id, "start", tok, map[string]any{"claim_generation": 1, "expected_version": 9}, ""), 409, "version_mismatch")
	// a's claim lease expires and b takes the task over: a claim expiry.
	n.Advance(11 * time.Minute)
	nodetest.Must(t, b.Ready(), 200)
	r, tok = b.Claim()
	nodetest.Must(t, r, 200)
	// b starts, its running lease expires, its complete is a late report.
	s := b.Call(id, "start", tok, map[string]any{"claim_generation": 2, "expected_version": 3}, "")
	nodetest.Must(t, s, 200)
	n.Advance(2 * time.Minute)
	ex := nodetest.Str(s.JSON(), "execution_id")
	nodetest.Must(t, b.Call(id, "heartbeat", tok, map[string]any{"claim_generation": 2, "execution_id": ex, "step": "x"}, ""), 409, "lease_expired")
	nodetest.Must(t, b.Call(id, "complete", tok, map[string]any{"claim_generation": 2, "execution_id": ex,
		"expected_version": 4, "result": map[string]any{}}, ""), 409, "lease_expired")
	if _, err := n.Snapshot(); err != nil {
		t.Fatal(err)
	}

	m1 := scrape(t, n)
	checks := []struct {
		name   string
		labels map[string]string
		min    float64
	}{
		{"taskledger_append_batch_size_count", nil, batches0 + 10},
		{"taskledger_append_commit_seconds_count", nil, commits0 + 10},
		{"taskledger_claims_total", nil, claims0 + 3},
		{"taskledger_commands_total", map[string]string{"type": "claim-next", "outcome": "ok"}, 3},
		{"taskledger_commands_total", map[string]string{"type": "complete", "outcome": "ok"}, 1},
		{"taskledger_commands_total", map[string]string{"type": "start", "outcome": "version_mismatch"}, 1},
		{"taskledger_commands_total", map[string]string{"type": "heartbeat", "outcome": "lease_expired"}, 1},
		{"taskledger_lease_expiries_total", map[string]string{"lease": "claim"}, 1},
		{"taskledger_lease_expiries_total", map[string]string{"lease": "running"}, 1},
		{"taskledger_snapshot_seconds_count", nil, 1},
	}
	for _, c := range checks {
		if got := sampleValue(m1, c.name, c.labels); got < c.min {
			t.Errorf("%s%v = %v, want at least %v", c.name, c.labels, got, c.min)
		}
	}
	if got := sampleValue(m1, "taskledger_append_batch_size_sum", nil); got < sampleValue(m1, "taskledger_append_batch_size_count", nil) {
		t.Errorf("batch size sum %v below the batch count", got)
	}
}
