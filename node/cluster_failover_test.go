package node_test

import (
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"

	"taskledger/ledger/jetstream/jstest"
	"taskledger/node"
	"taskledger/node/nodetest"
)

// The failover test: 64 devices spread over three taskledger nodes
// (HTTP, so commands to followers are forwarded) run claim → start →
// complete loops while an operator creates tasks; the sequencer node is
// hard-stopped, later one NATS server. Every acknowledged command must be
// in the stream, no task may have had two owners, no device two open
// tasks, and the stream must verify.

const failoverDevices = 64

// ack is one acknowledged (2xx) command that appends an event.
type ack struct {
	op, key string
	at      time.Time
}

type loadRun struct {
	nodes []*nodetest.Node
	alive []atomic.Bool
	stop  chan struct{}
	mu    sync.Mutex
	acks  []ack
	fails atomic.Int64 // 503s and transport errors, retried
}

func (l *loadRun) acked(op, key string) {
	l.mu.Lock()
	l.acks = append(l.acks, ack{op, key, time.Now()}) //tl:wallclock when an answer came (takeover figures)
	l.mu.Unlock()
}

// gapAround returns how long after t the first acknowledgement came, the
// longest time between two acknowledgements in [t, t+window], and how many
// came after t.
func (l *loadRun) gapAround(t time.Time, window time.Duration) (first, longest time.Duration, n int) {
	l.mu.Lock()
	defer l.mu.Unlock()
	first = -1
	prev := t
	for _, a := range l.acks { // in answer order
		if !a.at.After(t) {
			continue
		}
		n++
		if first < 0 {
			first = a.at.Sub(t)
		}
		if a.at.Before(t.Add(window)) && a.at.Sub(prev) > longest {
			longest = a.at.Sub(prev)
		}
		prev = a.at
	}
	return first, longest, n
}

func (l *loadRun) stopped() bool {
	select {
	case <-l.stop:
		return true
	default:
		return false
	}
}

// call sends a command until it gets an answer that is not a 503 or a
// transport error (the same idempotency key each time), moving to another
// living node when its node does not answer. ok reports an answer.
func (l *loadRun) call(at *int, method, path, token string, body any, headers map[string]string) (*nodetest.Resp, bool) {
	for !l.stopped() {
		n := l.nodes[*at]
		if !l.alive[*at].Load() {
			*at = (*at + 1) % len(l.nodes)
			continue
		}
		r := n.Try(method, path, token, body, headers)
		if r.Err == nil && r.Status != http.StatusServiceUnavailable {
			return r, true
		}
		l.fails.Add(1)
		if r.Err != nil {
			*at = (*at + 1) % len(l.nodes)
		}
		time.Sleep(20 * time.Millisecond)
	}
	return nil, false
}

type loadDevice struct {
	id, token, session string
}

func (l *loadRun) device(t *testing.T, d loadDevice, at int, wg *sync.WaitGroup) {
	defer wg.Done()
	auth := func(op string, body map[string]any, extra map[string]string) (*nodetest.Resp, string, bool) {
		key := nodetest.NewKey()
		h := map[string]string{"Idempotency-Key": key}
		for k, v := range extra {
			h[k] = v
		}
		body["device_id"] = d.id
		r, ok := l.call(&at, "POST", "/api/v1/device/"+op, d.token, body, h)
		return r, key, ok
	}
	for !l.stopped() {
		tok := nodetest.NewClaimToken()
		r, key, ok := auth("tasks/claim-next", map[string]any{"session_id": d.session}, map[string]string{"X-Claim-Token": tok})
		if !ok {
			return
		}
		if r.Status == http.StatusNoContent {
			time.Sleep(10 * time.Millisecond)
			continue
		}
		if r.Status == http.StatusConflict && strings.Contains(string(r.Body), "device_not_ready") {
			// A new sequencer holds the presence it loaded as restored:
			// the device reports it again, as after a restart.
			if !l.ready(&at, d) {
				return
			}
			continue
		}
		if r.Status != http.StatusOK {
			t.Errorf("claim-next: %d %s", r.Status, r.Body)
			return
		}
		l.acked("claim", key)
		id := nodetest.ClaimedTask(r)
		// step sends one task call and records it; false ends the device.
		step := func(op string, body map[string]any) (*nodetest.Resp, bool) {
			r, key, ok := auth("tasks/"+id+"/"+op, body, map[string]string{"X-Claim-Token": tok})
			if ok && r.Status != http.StatusOK {
				t.Errorf("%s: %d %s", op, r.Status, r.Body)
			}
			if !ok || r.Status != http.StatusOK {
				return nil, false
			}
			l.acked(op, key)
			return r, true
		}
		r, ok = step("start", map[string]any{"claim_generation": 1, "expected_version": 2})
		if !ok {
			return
		}
		ex := nodetest.Str(r.JSON(), "execution_id")
		if _, ok := step("complete", map[string]any{"claim_generation": 1, "execution_id": ex,
			"expected_version": 3, "result": map[string]any{"ok": true}}); !ok {
			return
		}
	}
}

func (l *loadRun) ready(at *int, d loadDevice) bool {
	r, ok := l.call(at, "POST", "/api/v1/device/heartbeat", d.token, map[string]any{
		"device_id": d.id, "app_version": "1.0.0", "os_version": "Android 14", "target_app_version": "7.1.0",
		"checks": map[string]bool{"accessibility_connected": true, "target_app_installed": true, "agent_running": true},
	}, map[string]string{"Idempotency-Key": nodetest.NewKey()})
	return ok && r.Status == http.StatusOK
}

func (l *loadRun) operator(t *testing.T, admin string, wg *sync.WaitGroup) {
	defer wg.Done()
	at := 1
	for i := 0; !l.stopped(); i++ {
		key := nodetest.NewKey()
		r, ok := l.call(&at, "POST", "/api/v1/admin/tasks", admin, map[string]any{"payload": map[string]any{"i": i},
			"authorize": map[string]any{"ttl_seconds": 3600}}, map[string]string{"Idempotency-Key": key})
		if !ok {
			return
		}
		if r.Status != http.StatusCreated {
			t.Errorf("create task: %d %s", r.Status, r.Body)
			return
		}
		l.acked("create", key)
		at = (at + 1) % len(l.nodes)
		time.Sleep(2 * time.Millisecond)
	}
}

// streamLeader is the server leading the stream's Raft group.
func streamLeader(servers []*server.Server, stream string) int {
	for i, s := range servers {
		if s.JetStreamIsStreamLeader(server.DEFAULT_GLOBAL_ACCOUNT, stream) {
			return i
		}
	}
	return -1
}

// TestFailoverUnderLoadLosesNothing: see the top of the file. The figures
// (takeover after the sequencer's crash, the longest pause after a NATS
// server's loss) are logged, not asserted beyond a generous bound.
func TestFailoverUnderLoadLosesNothing(t *testing.T) {
	servers := jstest.Cluster(t)
	url := jstest.URLs(servers)
	nodes := startNodes(t, url, 3)
	name := mustName(t)
	l := &loadRun{nodes: nodes, alive: make([]atomic.Bool, len(nodes)), stop: make(chan struct{})}
	for i := range l.alive {
		l.alive[i].Store(true)
	}
	var devs []loadDevice
	for i := 0; i < failoverDevices; i++ {
		d := nodes[i%3].RegisterDevice()
		nodetest.Must(t, d.Ready(), http.StatusOK)
		devs = append(devs, loadDevice{d.ID, d.Token, d.Session})
	}
	var wg sync.WaitGroup
	for g := 0; g < 4; g++ { // tasks enough for the first seconds; the operator adds more
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; i < 40; i++ {
				nodetest.Must(t, createVia(nodes[(g+i)%3], nodetest.NewKey()), http.StatusCreated)
			}
		}()
	}
	wg.Wait()
	wg.Add(1)
	go l.operator(t, nodes[0].AdminToken, &wg)
	for i, d := range devs {
		wg.Add(1)
		go l.device(t, d, i%3, &wg)
	}
	time.Sleep(2 * time.Second)

	// The sequencer's process dies.
	crashed := time.Now() //tl:wallclock takeover figure
	l.alive[0].Store(false)
	nodes[0].Kill(node.Crash)
	jstest.Eventually(t, 20*time.Second, "a standby sequences", func() error {
		if nodes[1].Role() != "sequencer" && nodes[2].Role() != "sequencer" {
			return fmt.Errorf("roles %q %q", nodes[1].Role(), nodes[2].Role())
		}
		return nil
	})
	elected := time.Since(crashed)
	// Then wait for an acknowledgement after that moment (none before it
	// counts: the dead sequencer's last answers can arrive just after the
	// crash, and its lease must expire before a standby takes over), and
	// measure the gap over that time and one second more. No fixed window
	// after the role changed: under load NATS takes up to 2 s to answer a
	// lease renewal, more than the tests' TTL, so the node that reports
	// "sequencer" may have let its local deadline pass (it answers 503
	// until a renewal succeeds; a batch it refused costs a reload of its
	// projections) or have lost the lease while it promoted (it steps down
	// and the other standby needs an election of its own: the 20 s above).
	tookOver := crashed.Add(elected)
	jstest.Eventually(t, 20*time.Second, "an acknowledgement after a standby took over", func() error {
		if _, _, n := l.gapAround(tookOver, 0); n == 0 {
			return fmt.Errorf("none yet (roles %q %q)", nodes[1].Role(), nodes[2].Role())
		}
		return nil
	})
	time.Sleep(time.Second)
	served, _, _ := l.gapAround(tookOver, 0)
	_, takeover, after := l.gapAround(crashed, time.Since(crashed))

	// One NATS server dies: the stream's leader, the worst one to lose.
	leader := streamLeader(servers, name+"_EVENTS")
	if leader < 0 {
		leader = 0
	}
	lost := time.Now() //tl:wallclock pause figure
	servers[leader].Shutdown()
	// Wait for service to resume (the stream's new leader answers the
	// requests asked again; docs/decisions.md D390), then measure the gap
	// over that time and one second more. Not asserted: reported.
	jstest.Eventually(t, 20*time.Second, "an acknowledgement after the NATS server was lost", func() error {
		if _, _, n := l.gapAround(lost, 0); n == 0 {
			return fmt.Errorf("none yet")
		}
		return nil
	})
	time.Sleep(time.Second)
	window := time.Since(lost)
	resumed, pause, afterNATS := l.gapAround(lost, window)
	close(l.stop)
	wg.Wait()

	t.Logf("sequencer crash: a standby sequenced after %v and the first acknowledgement came %v later; the longest time without an acknowledgement after the crash was %v (%d after it)",
		elected.Round(time.Millisecond), served.Round(time.Millisecond), takeover.Round(time.Millisecond), after)
	t.Logf("NATS stream leader lost: the first acknowledgement came %v after it, the longest time without one in the %v after it was %v (%d after it); %d acknowledged in all, %d answers retried (503 or no answer)",
		resumed.Round(time.Millisecond), window.Round(time.Millisecond), pause.Round(time.Millisecond), afterNATS, len(l.acks), l.fails.Load())
	if afterNATS == 0 {
		t.Fatal("nothing was acknowledged after a NATS server was lost")
	}

	survivor := nodes[1]
	keys := idemKeys(t, survivor.Log)
	lostAcks := 0
	for _, a := range l.acks {
		if !keys[a.key] {
			lostAcks++
			t.Errorf("acknowledged %s %s is not in the stream", a.op, a.key)
		}
	}
	claims := nodetest.CheckOwners(t, survivor.Log, nil)
	rep := verifyStream(t, jstest.URLs([]*server.Server{servers[(leader+1)%3], servers[(leader+2)%3]}), name)
	raw, _ := json.Marshal(map[string]any{"acks": len(l.acks), "lost": lostAcks, "claims": claims, "events": rep.Events})
	t.Logf("result: %s", raw)
	if claims == 0 {
		t.Fatal("no task was claimed")
	}
}
