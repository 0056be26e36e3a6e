package api_test

import (
	"net/http"
	"strconv"
	"testing"
	"time"

	"taskledger/node/nodetest"
)

// running is a started task and the calls its holder makes.
type running struct {
	*nodetest.Run
	n *nodetest.Node
}

func startRunning(t *testing.T, n *nodetest.Node) *running {
	t.Helper()
	return &running{Run: n.StartTask(t, n.ReadyDevice(t), nil), n: n}
}

func (r *running) beat(step, key string) *nodetest.Resp {
	return r.D.Call(r.TaskID, "heartbeat", r.Token, map[string]any{"claim_generation": 1, "execution_id": r.ExecutionID, "step": step}, key)
}

func (r *running) complete() *nodetest.Resp {
	v := nodetest.Num(r.n.Task(r.TaskID), "version")
	return r.Act("complete", map[string]any{"expected_version": v, "result": map[string]any{"ok": true}})
}

// lastEvent is the newest event of the log as the admin events route
// renders it.
func lastEvent(t *testing.T, n *nodetest.Node) map[string]any {
	t.Helper()
	h := n.Head()
	r := n.Do("GET", nodetest.AdminPath+"/events?after="+strconv.FormatUint(h-1, 10)+"&limit=1", n.AdminToken, nil, nil)
	nodetest.Must(t, r, http.StatusOK)
	evs := r.JSON()["events"].([]any)
	if len(evs) != 1 {
		t.Fatalf("events after %d: %s", h-1, r.Body)
	}
	return evs[0].(map[string]any)
}

func rfc(t *testing.T, s string) time.Time {
	t.Helper()
	v, err := time.Parse(time.RFC3339, s)
	if err != nil {
		t.Fatalf("time %q: %v", s, err)
	}
	return v
}

// A heartbeat that leaves the step unchanged appends no event, extends the
// running lease to now + 90 s, and the detail shows the extended lease;
// one that changes the step appends exactly one task.heartbeat.
func TestHeartbeatWithSameStepAppendsNoEvent(t *testing.T) {
	n := nodetest.Start(t)
	r := startRunning(t, n)

	before := n.Head()
	nodetest.Must(t, r.beat("download", ""), http.StatusOK) // the first step: one event
	if n.Head() != before+1 || nodetest.Str(lastEvent(t, n), "type") != "task.heartbeat" {
		t.Fatalf("a step change appends one task.heartbeat: head %d → %d", before, n.Head())
	}
	for i := 0; i < 5; i++ {
		n.Advance(30 * time.Second)
		h := n.Head()
		hb := r.beat("download", "")
		nodetest.Must(t, hb, http.StatusOK)
		if n.Head() != h {
			t.Fatalf("quiet heartbeat %d appended %d events", i, n.Head()-h)
		}
		m := hb.JSON()
		if rfc(t, nodetest.Str(m, "lease_expires_at")).Sub(rfc(t, nodetest.Str(m, "server_time"))) != 90*time.Second ||
			nodetest.Str(m, "step") != "download" || nodetest.Str(m, "state") != "RUNNING" {
			t.Fatalf("quiet heartbeat answer: %s", hb.Body)
		}
		ex := n.Task(r.TaskID)["execution"].(map[string]any)
		if nodetest.Str(ex, "lease_expires_at") != nodetest.Str(m, "lease_expires_at") {
			t.Fatalf("detail lease %v, answered %s", ex["lease_expires_at"], nodetest.Str(m, "lease_expires_at"))
		}
	}
	h := n.Head()
	nodetest.Must(t, r.beat("upload", ""), http.StatusOK)
	if n.Head() != h+1 {
		t.Fatalf("a step change appended %d events", n.Head()-h)
	}
	ev := lastEvent(t, n)
	if b := ev["body"].(map[string]any); nodetest.Str(b, "step") != "upload" || b["previous_lease_expires_at"] == nil {
		t.Fatalf("step change event: %v", ev)
	}
}

// Decisions taken on a lease that only quiet heartbeats extended record
// that lease in their event, and the chain proves them: the events' own
// lease expired long ago, the task still completes, and the node's
// cleanup replays and verifies the log.
func TestCompleteRecordsTheLeaseItWasJudgedAgainst(t *testing.T) {
	n := nodetest.Start(t)
	r := startRunning(t, n)
	nodetest.Must(t, r.beat("work", ""), http.StatusOK)
	var lease string
	for i := 0; i < 4; i++ { // 4 × 60 s: far past the 90 s the events set
		n.Advance(60 * time.Second)
		hb := r.beat("work", "")
		nodetest.Must(t, hb, http.StatusOK)
		lease = nodetest.Str(hb.JSON(), "lease_expires_at")
	}
	nodetest.Must(t, r.complete(), http.StatusOK)
	ev := lastEvent(t, n)
	if nodetest.Str(ev, "type") != "task.completed" || nodetest.Str(ev["body"].(map[string]any), "lease_expires_at") != lease {
		t.Fatalf("completion judged against %s: %v", lease, ev)
	}
}

// The extended lease is durable: after a restart the task still holds the
// lease a quiet heartbeat gave it (and not the one the events set), a
// replay of that heartbeat answers the same, and the lease ends exactly at
// its expiry.
func TestQuietHeartbeatLeaseSurvivesRestart(t *testing.T) {
	n := nodetest.Start(t)
	r := startRunning(t, n)
	nodetest.Must(t, r.beat("work", ""), http.StatusOK)
	n.Advance(80 * time.Second)
	key := nodetest.NewKey()
	first := r.beat("work", key)
	nodetest.Must(t, first, http.StatusOK)
	lease := rfc(t, nodetest.Str(first.JSON(), "lease_expires_at"))

	n = n.Restart()
	r.n, r.D.N = n, n
	ex := n.Task(r.TaskID)["execution"].(map[string]any)
	if !rfc(t, nodetest.Str(ex, "lease_expires_at")).Equal(lease) {
		t.Fatalf("after restart the lease is %v, want %v", ex["lease_expires_at"], lease)
	}
	again := r.beat("work", key)
	nodetest.MustReplay(t, first, again)

	// 89 s after the quiet heartbeat (well past the events' lease): alive.
	n.Advance(89 * time.Second)
	h := n.Head()
	nodetest.Must(t, r.beat("work", ""), http.StatusOK)
	if n.Head() != h {
		t.Fatal("a quiet heartbeat after restart appended an event")
	}
	// Without further heartbeats the lease ends exactly 90 s later.
	n.Advance(90 * time.Second)
	h = n.Head()
	n.MustRefuse(t, h, r.beat("work", ""), http.StatusConflict, "lease_expired")
	// A late completion is kept as a late report, judged against the
	// extended lease.
	resp := r.complete()
	nodetest.MustError(t, resp, http.StatusConflict, "lease_expired")
	ev := lastEvent(t, n)
	if nodetest.Str(ev, "type") != "task.late_report" || ev["body"].(map[string]any)["lease_expires_at"] == nil {
		t.Fatalf("late report: %v", ev)
	}
}

// A quiet heartbeat replayed after its execution ended is refused like any
// other replay of an ended execution; a new key after the end is refused
// by the state machine. Nothing is appended either way.
func TestQuietHeartbeatAfterTheEnd(t *testing.T) {
	n := nodetest.Start(t)
	r := startRunning(t, n)
	nodetest.Must(t, r.beat("work", ""), http.StatusOK)
	key := nodetest.NewKey()
	nodetest.Must(t, r.beat("work", key), http.StatusOK)
	nodetest.Must(t, r.complete(), http.StatusOK)
	h := n.Head()
	n.MustRefuse(t, h, r.beat("work", key), http.StatusConflict, "claim_replay_expired")
	n.MustRefuse(t, h, r.beat("work", ""), http.StatusNotFound, "claim_not_found")
}
