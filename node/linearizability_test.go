package node_test

// Linearizability of the task state machine over HTTP: 32 clients (30
// devices, an operator that creates, cancels and recovers tasks, and a
// clock client that advances the manual clock so that leases expire in the
// middle of the history) drive a real test node; every call and answer is
// recorded with logical timestamps, and porcupine checks the history
// against the sequential model of linmodel_test.go. A longer run:
//
//	go test ./node -run TestLinearizable -lin.ops 20000 -lin.timeout 10m

import (
	"bytes"
	"cmp"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/anishathalye/porcupine"
	"github.com/google/uuid"

	"taskledger/commands"
	"taskledger/node/nodetest"
)

var (
	linOps     = flag.Int("lin.ops", 500, "operations recorded by TestLinearizable")
	linTimeout = flag.Duration("lin.timeout", 2*time.Minute, "time porcupine may take to check the history")
)

const (
	linDevices      = 26 // + 4 creators, an operator and the clock: 32 clients
	linCreators     = 4
	linLiveTasks    = 36
	linClaimLease   = time.Minute
	linRunningLease = 3 * time.Minute
	linPresenceTTL  = 2 * time.Minute
	linAuthTTL      = 3600
)

// recorder collects a history with logical timestamps (one counter for
// calls and returns, so real-time order is exact).
type recorder struct {
	clock   atomic.Int64
	mu      sync.Mutex
	ops     []porcupine.Operation
	budget  atomic.Int64 // operations left to send
	count   atomic.Int64 // operations recorded
	ended   atomic.Int64 // tasks seen ending (completed, canceled, recovered)
	created atomic.Int64 // creations sent
	tasks   []string     // created tasks (under mu)
	// progress is signalled by every recorded operation (capacity 1):
	// the operator and the clock act on it, never on a timer.
	progress chan struct{}
	tick     chan struct{} // the same, for the clock client
	done     chan struct{} // closed when the budget is spent
	doneOnce sync.Once
	url      string
	urls     []string // when set, client i talks to urls[i % len] (a cluster)
	http     *http.Client
	// changed is closed (and replaced) after every operation that may make
	// a task claimable or free a device: a device told "no task" waits on it.
	chMu    sync.Mutex
	changed chan struct{}
	admin   string
}

// urlFor is the node client talks to.
func (r *recorder) urlFor(client int) string {
	if len(r.urls) == 0 {
		return r.url
	}
	return r.urls[client%len(r.urls)]
}

// take reserves one operation of the budget.
func (r *recorder) take() bool {
	if r.budget.Add(-1) < 0 {
		r.doneOnce.Do(func() { close(r.done) })
		return false
	}
	return true
}

// send performs one HTTP request and records it as an operation.
func (r *recorder) send(client int, in linIn, method, path, token string, body any, headers map[string]string) (linOut, map[string]any, error) {
	raw, _ := json.Marshal(body)
	req, err := http.NewRequest(method, r.urlFor(client)+path, bytes.NewReader(raw))
	if err != nil {
		return linOut{}, nil, err
	}
	req.Header.Set("Authorization", "Bearer "+token)
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Idempotency-Key", uuid.NewString())
	for k, v := range headers {
		req.Header.Set(k, v)
	}
	call := r.clock.Add(1)
	res, err := r.http.Do(req)
	if err != nil {
		return linOut{}, nil, err
	}
	data, err := io.ReadAll(res.Body)
	res.Body.Close()
	ret := r.clock.Add(1)
	if err != nil {
		return linOut{}, nil, err
	}
	var m map[string]any
	if len(data) > 0 {
		if err := json.Unmarshal(data, &m); err != nil {
			return linOut{}, nil, fmt.Errorf("%s %s: %d %q: %v", method, path, res.StatusCode, data, err)
		}
	}
	out, err := outOf(res.StatusCode, m)
	if err != nil {
		return out, m, fmt.Errorf("%s %s: %v", method, path, err)
	}
	if res.StatusCode >= 500 || res.StatusCode == 400 || res.StatusCode == 429 {
		return out, m, fmt.Errorf("%s %s: unexpected %d %s", method, path, res.StatusCode, data)
	}
	r.mu.Lock()
	r.ops = append(r.ops, porcupine.Operation{ClientId: client, Input: partitionedOp{in: in}, Call: call, Output: out, Return: ret})
	r.mu.Unlock()
	r.count.Add(1)
	switch in.Op {
	case opCreate, opRelease, opAdvance, opRecover, opCancel, opComplete:
		r.chMu.Lock()
		close(r.changed)
		r.changed = make(chan struct{})
		r.chMu.Unlock()
	}
	select {
	case r.progress <- struct{}{}:
	default:
	}
	select {
	case r.tick <- struct{}{}:
	default:
	}
	return out, m, nil
}

// outOf reads an answer into the model's terms.
func outOf(status int, m map[string]any) (linOut, error) {
	out := linOut{Status: status, Code: nodetest.Str(m, "code"), State: nodetest.Str(m, "state"),
		Version: nodetest.Num(m, "version"), Gen: nodetest.Num(m, "claim_generation"),
		Exec: nodetest.Str(m, "execution_id")}
	out.CancelReq, _ = m["cancel_requested"].(bool)
	var err error
	ms := func(s string) int64 {
		if s == "" {
			return 0
		}
		t, e := time.Parse(time.RFC3339Nano, s)
		if e != nil && err == nil {
			err = e
		}
		return t.UnixMilli()
	}
	out.Lease = ms(nodetest.Str(m, "lease_expires_at"))
	out.Now = ms(nodetest.Str(m, "server_time"))
	if task, ok := m["task"].(map[string]any); ok {
		out.Task = nodetest.Str(task, "id")
	}
	if _, ok := m["payload"]; ok { // a task detail document (admin)
		out.Task = nodetest.Str(m, "id")
		out.Now = ms(nodetest.Str(m, "created_at"))
		if ex, ok := m["execution"].(map[string]any); ok {
			out.Exec = nodetest.Str(ex, "id")
		}
	}
	return out, err
}

// linDevice is one device client: it claims, renews, releases, starts,
// heartbeats and completes, choosing at random, and reports started tasks
// whose running lease expired to the operator.
type linDevice struct {
	r                *recorder
	idx              int
	id, token, sess  string
	rng              *rand.Rand
	held, tok, exec  string
	gen, version     uint64
	lease            int64
	started, visible bool // visible: the claim was answered and not seen ended
	stuck            chan<- stuckTask
}

type stuckTask struct {
	task    string
	version uint64
}

func (d *linDevice) run() error {
	for d.r.take() {
		if err := d.next(); err != nil {
			return err
		}
	}
	return nil
}

func (d *linDevice) call(op string, body map[string]any) (linOut, error) {
	in := linIn{Op: op, Task: d.held, Dev: d.id, Tok: d.tok, Gen: d.gen}
	body["device_id"], body["claim_generation"] = d.id, d.gen
	if v, ok := body["expected_version"]; ok {
		in.Version = v.(uint64)
	}
	if e, ok := body["execution_id"]; ok {
		in.Exec = e.(string)
	}
	if op == opRenew {
		in.Expect = d.lease
		body["session_id"] = d.sess
		body["expected_lease_expires_at"] = time.UnixMilli(d.lease).UTC().Format("2006-01-02T15:04:05.000Z")
	}
	out, _, err := d.r.send(d.idx, in, "POST", "/api/v1/device/tasks/"+d.held+"/"+map[string]string{opRenew: "lease/"}[op]+op, d.token, body,
		map[string]string{"X-Claim-Token": d.tok})
	return out, err
}

func (d *linDevice) next() error {
	if !d.visible || d.rng.IntN(10) == 0 {
		return d.claim()
	}
	if !d.started {
		switch n := d.rng.IntN(10); {
		case n < 2:
			out, err := d.call(opRenew, map[string]any{})
			if err == nil && out.Status == 200 {
				d.lease = out.Lease
			}
			d.lost(out)
			return err
		case n < 4:
			out, err := d.call(opRelease, map[string]any{"expected_version": d.version})
			if err == nil && out.Status == 200 {
				d.visible, d.held = false, ""
			}
			d.lost(out)
			return err
		default:
			out, err := d.call(opStart, map[string]any{"expected_version": d.version})
			if err == nil && out.Status == 200 {
				d.started, d.exec, d.version, d.lease = true, out.Exec, out.Version, out.Lease
			}
			d.lost(out)
			return err
		}
	}
	if d.rng.IntN(3) > 0 {
		out, err := d.call(opHeartbeat, map[string]any{"execution_id": d.exec, "step": fmt.Sprintf("step-%d", d.rng.IntN(3))})
		if err == nil && out.Status == 200 {
			d.lease = out.Lease
		}
		d.lost(out)
		return err
	}
	out, err := d.call(opComplete, map[string]any{"execution_id": d.exec, "expected_version": d.version,
		"result": map[string]any{"ok": true}})
	if err == nil && out.Status == 200 {
		d.visible, d.held = false, ""
		d.r.ended.Add(1)
	}
	d.lost(out)
	return err
}

// lost handles an answer that ends the device's hold on its task.
func (d *linDevice) lost(out linOut) {
	if out.Status == 200 {
		return
	}
	if d.started && out.Code == "lease_expired" {
		select {
		case d.stuck <- stuckTask{task: d.held, version: d.version}:
		default: // the operator's queue is full: it will be asked again
		}
	}
	if out.Code == "lease_expired" || out.Code == "claim_not_found" {
		d.visible = false // held stays: the next claim-next may re-claim it
	}
}

func (d *linDevice) claim() error {
	// Presence first (not part of the model: only this device moves it).
	pres, err := d.r.presence(d)
	if err != nil {
		return err
	}
	if !d.visible {
		d.tok = nodetest.NewClaimToken()
	}
	in := linIn{Op: opClaim, Dev: d.id, Tok: d.tok, PresenceExp: pres, Held: d.held}
	d.r.chMu.Lock()
	changed := d.r.changed
	d.r.chMu.Unlock()
	out, m, err := d.r.send(d.idx, in, "POST", "/api/v1/device/tasks/claim-next", d.token,
		map[string]any{"device_id": d.id, "session_id": d.sess}, map[string]string{"X-Claim-Token": d.tok})
	if err != nil {
		return err
	}
	if out.Status != 200 {
		if out.Status == 204 || out.Code == "claim_requires_manual" {
			select { // nothing to do until a task frees up or time passes
			case <-changed:
			case <-d.r.done:
			}
		}
		return nil
	}
	if d.held != out.Task || !d.visible {
		d.started, d.exec = false, ""
	}
	d.held, d.gen, d.version, d.lease, d.visible = out.Task, out.Gen, out.Version, out.Lease, true
	if c, ok := m["claim"].(map[string]any); ok && nodetest.Num(c, "generation") != out.Gen {
		return fmt.Errorf("claim-next: claim.generation %v, claim_generation %d", c["generation"], out.Gen)
	}
	return nil
}

// presence sends a presence heartbeat and returns presence_expires_at (ms).
func (r *recorder) presence(d *linDevice) (int64, error) {
	raw, _ := json.Marshal(map[string]any{"device_id": d.id, "app_version": "1.0.0", "os_version": "Android 14",
		"target_app_version": "7.1.0", "checks": map[string]bool{"accessibility_connected": true, "target_app_installed": true}})
	req, _ := http.NewRequest("POST", r.urlFor(d.idx)+"/api/v1/device/heartbeat", bytes.NewReader(raw))
	req.Header.Set("Authorization", "Bearer "+d.token)
	req.Header.Set("Content-Type", "application/json")
	res, err := r.http.Do(req)
	if err != nil {
		return 0, err
	}
	defer res.Body.Close()
	var m map[string]any
	if err := json.NewDecoder(res.Body).Decode(&m); err != nil || res.StatusCode != 200 {
		return 0, fmt.Errorf("presence: %d %v %v", res.StatusCode, m, err)
	}
	t, err := time.Parse(time.RFC3339Nano, nodetest.Str(m, "presence_expires_at"))
	return t.UnixMilli(), err
}

// creator keeps linLiveTasks tasks open (several creators run at once, so
// creation keeps up with the devices); operator cancels a recent task now
// and then and recovers the tasks devices report stuck; clockClient
// advances the clock every few operations. They act on recorded progress
// (never on a timer) and stop with the budget.
func (r *recorder) creator(client int, t0 int64, rng *rand.Rand) error {
	for {
		if r.created.Load()-r.ended.Load() >= linLiveTasks {
			select {
			case <-r.done:
				return nil
			case <-r.progress:
			}
			continue
		}
		if !r.take() {
			return nil
		}
		r.created.Add(1)
		out, _, err := r.send(client, linIn{Op: opCreate, TTL: linAuthTTL, Base: t0}, "POST", "/api/v1/admin/tasks", r.admin,
			map[string]any{"payload": map[string]any{"n": rng.IntN(1000)}, "authorize": map[string]any{"ttl_seconds": linAuthTTL}}, nil)
		if err != nil {
			return err
		}
		r.mu.Lock()
		r.tasks = append(r.tasks, out.Task)
		r.mu.Unlock()
	}
}

func (r *recorder) operator(client int, stuck <-chan stuckTask, rng *rand.Rand) error {
	last := int64(0)
	for {
		var s stuckTask
		select {
		case <-r.done:
			return nil
		case s = <-stuck:
		case <-r.progress:
			if n := r.count.Load(); n < last+15 {
				continue
			}
		}
		last = r.count.Load()
		if !r.take() {
			return nil
		}
		if s.task != "" {
			out, _, err := r.send(client, linIn{Op: opRecover, Task: s.task, Version: s.version}, "POST",
				"/api/v1/admin/tasks/"+s.task+"/recover", r.admin,
				map[string]any{"decision": "fail", "reason": "lease expired", "expected_version": s.version}, nil)
			if err != nil {
				return err
			}
			if out.Status == 200 {
				r.ended.Add(1)
			}
			continue
		}
		r.mu.Lock()
		task := ""
		if len(r.tasks) > 0 {
			task = r.tasks[max(0, len(r.tasks)-1-rng.IntN(linLiveTasks))]
		}
		r.mu.Unlock()
		if task == "" {
			continue
		}
		out, _, err := r.send(client, linIn{Op: opCancel, Task: task}, "POST", "/api/v1/admin/tasks/"+task+"/cancel",
			r.admin, map[string]any{"reason": "operator"}, nil)
		if err != nil {
			return err
		}
		if out.Status == 200 && out.State == stCanceled {
			r.ended.Add(1)
		}
	}
}

func (r *recorder) clockClient(client int, rng *rand.Rand) error {
	last := int64(0)
	for {
		if n := r.count.Load(); n < last+12 {
			select {
			case <-r.done:
				return nil
			case <-r.tick:
			}
			continue
		}
		last = r.count.Load()
		if !r.take() {
			return nil
		}
		secs := int64(20 + rng.IntN(60))
		if _, _, err := r.send(client, linIn{Op: opAdvance, Seconds: secs}, "POST", "/api/v1/admin/test-clock/advance",
			r.admin, map[string]any{"seconds": secs}, nil); err != nil {
			return err
		}
	}
}

// recordHistory runs the workload against a fresh node and returns the
// history, the model it must satisfy, and the start time of the clock.
func recordHistory(t *testing.T, ops int, seed uint64) ([]porcupine.Operation, *linModel) {
	t.Helper()
	n := nodetest.Start(t, linConfig)
	return recordHistoryOn(t, n, nil, ops, seed)
}

// linConfig is the leases of the linearizability workload.
var linConfig = nodetest.WithConfig(func(c *commands.Config) {
	c.ClaimLease, c.RunningLease, c.PresenceTTL = linClaimLease, linRunningLease, linPresenceTTL
})

// recordHistoryOn runs the workload against node n, its clients spread
// over urls when given (the nodes of a cluster).
func recordHistoryOn(t *testing.T, n *nodetest.Node, urls []string, ops int, seed uint64) ([]porcupine.Operation, *linModel) {
	t.Helper()
	r := &recorder{changed: make(chan struct{}), progress: make(chan struct{}, 1), tick: make(chan struct{}, 1), done: make(chan struct{}), url: n.URL, urls: urls, admin: n.AdminToken,
		http: &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 64}, Timeout: time.Minute}}
	defer r.http.CloseIdleConnections()
	r.budget.Store(int64(ops))
	devs := make([]*linDevice, linDevices)
	stuck := make(chan stuckTask, linDevices)
	for i := range devs {
		d := n.RegisterDevice()
		devs[i] = &linDevice{r: r, idx: i, id: d.ID, token: d.Token, sess: d.Session, stuck: stuck,
			rng: rand.New(rand.NewPCG(seed, uint64(i)))}
	}
	// The clock's start value: the server_time of one advance before the history.
	adv := n.Do("POST", "/api/v1/admin/test-clock/advance", n.AdminToken, map[string]any{"seconds": 1}, nil)
	nodetest.Must(t, adv, 200)
	start, err := time.Parse(time.RFC3339Nano, nodetest.Str(adv.JSON(), "server_time"))
	if err != nil {
		t.Fatal(err)
	}
	t0 := start.UnixMilli()

	errs := make(chan error, linDevices+linCreators+2)
	var wg sync.WaitGroup
	for _, d := range devs {
		wg.Go(func() { errs <- d.run() })
	}
	for i := range linCreators {
		wg.Go(func() { errs <- r.creator(linDevices+i, t0, rand.New(rand.NewPCG(seed, uint64(1000+i)))) })
	}
	wg.Go(func() { errs <- r.operator(linDevices+linCreators, stuck, rand.New(rand.NewPCG(seed, 2000))) })
	wg.Go(func() { errs <- r.clockClient(linDevices+linCreators+1, rand.New(rand.NewPCG(seed, 2001))) })
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Fatal(err)
		}
	}
	// Creation order (the selection's "oldest first", ties by seq) is read
	// from the log: creations run concurrently and share milliseconds.
	m := &linModel{claimLease: linClaimLease.Milliseconds(), runningLease: linRunningLease.Milliseconds(), rank: map[string]int{}}
	for after := uint64(0); ; {
		page := n.Do("GET", fmt.Sprintf("/api/v1/admin/events?after=%d&limit=1000", after), n.AdminToken, nil, nil)
		nodetest.Must(t, page, 200)
		evs, _ := page.JSON()["events"].([]any)
		for _, e := range evs {
			ev := e.(map[string]any)
			if nodetest.Str(ev, "type") == "task.created" {
				m.rank[nodetest.Str(ev["body"].(map[string]any), "task_id")] = int(nodetest.Num(ev, "seq"))
			}
			after = nodetest.Num(ev, "seq")
		}
		if len(evs) == 0 {
			break
		}
	}
	return r.ops, m
}

// summary counts a history's operations by kind and outcome.
func summary(ops []porcupine.Operation) map[string]int {
	c := map[string]int{}
	for _, op := range ops {
		in, out := op.Input.(partitionedOp).in, op.Output.(linOut)
		k := in.Op
		if out.Code != "" {
			k += ":" + out.Code
		} else if out.Status/100 != 2 || out.Status == 204 {
			k += fmt.Sprintf(":%d", out.Status)
		}
		c[k]++
	}
	return c
}

func TestLinearizableTaskStateMachine(t *testing.T) {
	seed := uint64(time.Now().UnixNano())
	t.Logf("seed %d, %d operations", seed, *linOps)
	began := time.Now()
	history, m := recordHistory(t, *linOps, seed)
	checkLinearizable(t, history, m, time.Since(began))
}

// checkLinearizable checks a recorded history against the model, after
// checking it exercises what it claims to check.
func checkLinearizable(t *testing.T, history []porcupine.Operation, m *linModel, recorded time.Duration) {
	t.Helper()
	c := summary(history)
	// The history must exercise what it claims to check.
	for _, k := range []string{opCreate, opAdvance, opClaim, opStart, opHeartbeat, opComplete, opRelease, opRenew, opCancel} {
		if c[k] == 0 {
			t.Errorf("no successful %s in the history: %v", k, c)
		}
	}
	if c[opRenew+":lease_expired"]+c[opStart+":lease_expired"]+c[opHeartbeat+":lease_expired"]+
		c[opRelease+":lease_expired"]+c[opComplete+":lease_expired"] == 0 {
		t.Errorf("no lease expired in the middle of the history: %v", c)
	}
	checkStart := time.Now()
	res := porcupine.CheckOperationsTimeout(m.porcupineModel(), history, *linTimeout)
	parts := len(m.partition(history))
	t.Logf("%d operations (%d partitions) recorded in %v, checked in %v: %v; outcomes %v",
		len(history), parts, recorded.Round(time.Millisecond), time.Since(checkStart).Round(time.Millisecond), res, c)
	if res != porcupine.Ok {
		dumpIllegal(t, m, history)
		t.Fatalf("history is %v against the task state machine", res)
	}
}

// dumpIllegal logs, for the first partitions that are illegal on their
// own, the longest prefix porcupine linearized, the model state after it
// and the next operations with whether each could follow.
func dumpIllegal(t *testing.T, m *linModel, history []porcupine.Operation) {
	model := m.porcupineModel()
	single := model
	single.Partition = nil
	shown := 0
	for i, part := range m.partition(history) {
		res, info := porcupine.CheckOperationsVerbose(single, part, time.Minute)
		if res == porcupine.Ok || shown == 2 {
			continue
		}
		shown++
		var longest []porcupine.Operation
		for _, p := range info.PartialLinearizationsOperations()[0] {
			if len(p) > len(longest) {
				longest = p
			}
		}
		st := model.Init()
		done := map[[2]int64]bool{}
		for _, op := range longest {
			_, st = model.Step(st, op.Input, op.Output)
			done[[2]int64{op.Call, op.Return}] = true
		}
		for _, op := range longest[max(0, len(longest)-8):] {
			t.Logf("partition %d [%d,%d]: %s", i, op.Call, op.Return, model.DescribeOperation(op.Input, op.Output))
		}
		t.Logf("partition %d: %v, %d of %d operations linearized, state after them: %+v", i, res, len(longest), len(part), st)
		rest := 0
		for _, op := range part {
			if done[[2]int64{op.Call, op.Return}] || rest == 6 {
				continue
			}
			rest++
			ok, _ := model.Step(st, op.Input, op.Output)
			t.Logf("partition %d next [%d,%d] legal=%v: %s", i, op.Call, op.Return, ok, model.DescribeOperation(op.Input, op.Output))
		}
	}
}

// hist builds a history by hand: each step is (call, return, input, output).
type histStep struct {
	call, ret int64
	in        linIn
	out       linOut
}

func handHistory(steps []histStep) []porcupine.Operation {
	var ops []porcupine.Operation
	for i, s := range steps {
		ops = append(ops, porcupine.Operation{ClientId: i, Input: partitionedOp{in: s.in}, Call: s.call, Output: s.out, Return: s.ret})
	}
	return ops
}

// Two devices both acknowledged as holding one task, with no time passing
// between the claims: the model refuses it; the same two claims with the
// first lease expired in between are accepted.
func TestLinearizabilityModelRejectsTwoHolders(t *testing.T) {
	const t0, lease = int64(1_000_000), int64(60_000)
	m := &linModel{claimLease: lease, runningLease: 180_000, rank: map[string]int{"x": 1}}
	create := histStep{1, 2, linIn{Op: opCreate, TTL: 3600, Base: t0}, linOut{Status: 201, Task: "x", State: stPending, Version: 1, Now: t0}}
	claimA := histStep{3, 4, linIn{Op: opClaim, Dev: "a", Tok: "ta", PresenceExp: t0 + 1e9},
		linOut{Status: 200, Task: "x", State: stClaimed, Gen: 1, Version: 2, Lease: t0 + lease, Now: t0}}
	claimB := func(now int64, call int64) histStep {
		return histStep{call, call + 1, linIn{Op: opClaim, Dev: "b", Tok: "tb", PresenceExp: now + 1e9},
			linOut{Status: 200, Task: "x", State: stClaimed, Gen: 2, Version: 3, Lease: now + lease, Now: now}}
	}
	illegal := handHistory([]histStep{create, claimA, claimB(t0, 5)})
	if res := porcupine.CheckOperationsTimeout(m.porcupineModel(), illegal, 10*time.Second); res != porcupine.Illegal {
		t.Fatalf("two holders of one task: %v, want Illegal", res)
	}
	// Overlapping claims cannot hide it either: whatever the order, one
	// claim was answered while the other's lease was valid.
	overlap := handHistory([]histStep{create, {3, 6, claimA.in, claimA.out}, {4, 5, claimB(t0, 0).in, claimB(t0, 0).out}})
	if res := porcupine.CheckOperationsTimeout(m.porcupineModel(), overlap, 10*time.Second); res != porcupine.Illegal {
		t.Fatalf("overlapping double claim: %v, want Illegal", res)
	}
	advance := histStep{5, 6, linIn{Op: opAdvance, Seconds: 60}, linOut{Status: 200, Now: t0 + lease}}
	legal := handHistory([]histStep{create, claimA, advance, claimB(t0+lease, 7)})
	if res := porcupine.CheckOperationsTimeout(m.porcupineModel(), legal, 10*time.Second); res != porcupine.Ok {
		t.Fatalf("re-claim after the lease expired: %v, want Ok", res)
	}
	// A device that completes a task it lost: acknowledged after another
	// device claimed the task, with no lease expiry in between.
	start := histStep{5, 6, linIn{Op: opStart, Task: "x", Dev: "a", Tok: "ta", Gen: 1, Version: 2},
		linOut{Status: 200, State: stRunning, Version: 3, Gen: 1, Lease: t0 + 180_000, Now: t0, Exec: "e1"}}
	reclaimed := handHistory([]histStep{create, claimA, start, claimB(t0, 7)})
	if res := porcupine.CheckOperationsTimeout(m.porcupineModel(), reclaimed, 10*time.Second); res != porcupine.Illegal {
		t.Fatalf("claim of a started task: %v, want Illegal", res)
	}
}

// A device given a younger task while an older one was claimable, and a
// "no task" answer while one was claimable: both refused.
func TestLinearizabilityModelRejectsWrongSelection(t *testing.T) {
	const t0 = int64(1_000_000)
	m := &linModel{claimLease: 60_000, runningLease: 180_000, rank: map[string]int{"x": 1, "y": 2}}
	steps := []histStep{
		{1, 2, linIn{Op: opCreate, TTL: 3600, Base: t0}, linOut{Status: 201, Task: "x", State: stPending, Version: 1, Now: t0}},
		{3, 4, linIn{Op: opCreate, TTL: 3600, Base: t0}, linOut{Status: 201, Task: "y", State: stPending, Version: 1, Now: t0}},
	}
	younger := append(append([]histStep{}, steps...), histStep{5, 6, linIn{Op: opClaim, Dev: "a", Tok: "ta", PresenceExp: t0 + 1e9},
		linOut{Status: 200, Task: "y", State: stClaimed, Gen: 1, Version: 2, Lease: t0 + 60_000, Now: t0}})
	if res := porcupine.CheckOperationsTimeout(m.porcupineModel(), handHistory(younger), 10*time.Second); res != porcupine.Illegal {
		t.Fatalf("younger task given first: %v, want Illegal", res)
	}
	none := append(append([]histStep{}, steps...), histStep{5, 6, linIn{Op: opClaim, Dev: "a", Tok: "ta", PresenceExp: t0 + 1e9},
		linOut{Status: 204}})
	if res := porcupine.CheckOperationsTimeout(m.porcupineModel(), handHistory(none), 10*time.Second); res != porcupine.Illegal {
		t.Fatalf("no task while two are claimable: %v, want Illegal", res)
	}
}

// A real recorded history with one acknowledged answer altered (a
// generation reported one higher) is refused: the check on real traffic
// can fail.
func TestLinearizabilityCheckRejectsAlteredRecordedHistory(t *testing.T) {
	history, m := recordHistory(t, 300, uint64(time.Now().UnixNano()))
	// The claimed task's own partition is where a claim's generation is
	// judged; an acknowledged claim is altered and only its task's
	// partition is checked (with and without the change): the whole
	// history's check is TestLinearizable's. Proving a partition illegal
	// searches every order of its overlapping operations, which for some
	// partitions of a few dozen takes minutes on a loaded machine, so the
	// claims are tried smallest partition first, each check bounded: the
	// first whose search ends decides (Illegal passes, Ok fails), and a
	// search cut short moves on to the next claim.
	single := m.porcupineModel()
	single.Partition = nil
	own := map[string][]porcupine.Operation{}
	for _, part := range m.partition(history) {
		if len(part) > 0 {
			own[part[0].Input.(partitionedOp).task] = part
		}
	}
	var claims []porcupine.Operation
	tried := map[string]bool{}
	for _, op := range history {
		in, out := op.Input.(partitionedOp).in, op.Output.(linOut)
		if in.Op == opClaim && out.Status == 200 && own[out.Task] != nil && !tried[out.Task] {
			tried[out.Task] = true // one claim per task: its partition is what is searched
			claims = append(claims, op)
		}
	}
	if len(claims) == 0 {
		t.Fatal(errors.New("no acknowledged claim in the history"))
	}
	slices.SortStableFunc(claims, func(a, b porcupine.Operation) int {
		return cmp.Compare(len(own[a.Output.(linOut).Task]), len(own[b.Output.(linOut).Task]))
	})
	const bound = 30 * time.Second
	for _, target := range claims[:min(len(claims), 6)] {
		part := own[target.Output.(linOut).Task]
		altered := append([]porcupine.Operation(nil), part...)
		found := false
		for k, op := range altered {
			if op.Call == target.Call && op.Return == target.Return && op.Input.(partitionedOp).in.Op == opClaim {
				out := op.Output.(linOut)
				out.Gen++
				altered[k].Output = out
				found = true
			}
		}
		if !found {
			t.Fatal("the claim is not in its task's partition")
		}
		switch res := porcupine.CheckOperationsTimeout(single, part, bound); res {
		case porcupine.Illegal:
			t.Fatalf("recorded partition of %d operations: Illegal, want Ok", len(part))
		case porcupine.Unknown:
			t.Logf("recorded partition of %d operations: search cut short after %v; the next claim", len(part), bound)
			continue
		}
		switch res := porcupine.CheckOperationsTimeout(single, altered, bound); res {
		case porcupine.Ok:
			t.Fatalf("altered partition of %d operations: Ok, want Illegal", len(part))
		case porcupine.Illegal:
			t.Logf("altered one claim in a partition of %d operations: Illegal", len(part))
			return
		}
		t.Logf("altered partition of %d operations: search cut short after %v; the next claim", len(part), bound)
	}
	t.Fatalf("no altered partition's search ended within %v (of %d claims tried)", bound, min(len(claims), 6))
}
