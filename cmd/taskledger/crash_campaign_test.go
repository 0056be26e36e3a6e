package main_test

// The crash campaign: the real binary under concurrent device and operator
// load (claim, start, heartbeat, complete, release; create, cancel),
// SIGKILLed at random moments -campaign times. Every acknowledged (2xx)
// command is kept client-side with its Idempotency-Key; after each kill,
// with the server down, `taskledger verify` must pass, every command
// acknowledged so far must be in the log under its key (a "no task" answer
// among the soft records), and no task may have been held by two devices.
// The default `go test` runs a short campaign; the long one:
//
//	go test ./cmd/taskledger -run CrashCampaign -campaign 50

import (
	"encoding/json"
	"flag"
	"fmt"
	"math/rand/v2"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"

	"taskledger/events"
	"taskledger/ledger"
	"taskledger/node/nodetest"
	"taskledger/node/nodetest/proc"
	"taskledger/projections"
)

var campaignKills = flag.Int("campaign", 3, "SIGKILLs of TestCrashCampaign")

// campaignAck is one acknowledged command and the event types that may
// record it.
type campaignAck struct {
	key, device, task string
	types             []events.Type // empty: a recorded "no task" (soft record)
}

// campaign is the load and its client-side log.
type campaign struct {
	load  *crashLoad // transport with retry across restarts, and the kill signal
	mu    sync.Mutex
	acks  []campaignAck
	tasks []string
	stop  chan struct{}
}

func (c *campaign) ack(a campaignAck) {
	c.mu.Lock()
	c.acks = append(c.acks, a)
	if len(a.types) > 0 && a.types[0] == events.EvTaskCreated {
		c.tasks = append(c.tasks, a.task)
	}
	c.mu.Unlock()
	c.load.signal() // counts and signals the killer
}

func (c *campaign) stopped() bool {
	select {
	case <-c.stop:
		return true
	default:
		return false
	}
}

// post sends a POST with a fresh key until answered (see crashLoad.send)
// and returns the answer and the key.
func (c *campaign) post(path, token string, body any, headers map[string]string) (*nodetest.Resp, string, error) {
	key := uuid.NewString()
	h := map[string]string{"Idempotency-Key": key}
	for k, v := range headers {
		h[k] = v
	}
	a, err := c.load.send("POST", path, token, body, h)
	return a, key, err
}

// device runs work cycles until the campaign stops: claim, then release or
// start → heartbeats → complete. A refusal (the operator canceled the task)
// ends the cycle.
func (c *campaign) device(d crashDevice, rng *rand.Rand) error {
	for !c.stopped() {
		tok := nodetest.NewClaimToken()
		key := uuid.NewString()
		var a *nodetest.Resp
		for {
			var err error
			a, err = c.load.send("POST", "/api/v1/device/tasks/claim-next", d.token,
				map[string]any{"device_id": d.id, "session_id": d.session},
				map[string]string{"Idempotency-Key": key, "X-Claim-Token": tok})
			if err != nil {
				return err
			}
			if a.Status != 409 || a.Code() != "device_not_ready" {
				break
			}
			c.load.notReady.Add(1) // presence is soft state: gone after a restart
			if h, err := c.load.send("POST", "/api/v1/device/heartbeat", d.token, presenceBody(d.id), nil); err != nil {
				return err
			} else if h.Status != 200 {
				return fmt.Errorf("presence heartbeat: %s", h)
			}
		}
		switch {
		case a.Status == 204:
			c.ack(campaignAck{key: key, device: d.id})
			c.waitForWork()
			continue
		case a.Status != 200:
			return fmt.Errorf("claim-next: %s", a)
		}
		m := a.JSON()
		task, gen, version := nodetest.Str(nodetest.Obj(m, "task"), "id"), nodetest.Num(m, "claim_generation"), nodetest.Num(m, "version")
		c.ack(campaignAck{key: key, device: d.id, task: task, types: []events.Type{events.EvTaskClaimed, events.EvTaskClaimResumed}})
		path := "/api/v1/device/tasks/" + task + "/"
		hdr := map[string]string{"X-Claim-Token": tok}
		if rng.IntN(4) == 0 {
			r, key, err := c.post(path+"release", d.token,
				map[string]any{"device_id": d.id, "claim_generation": gen, "expected_version": version}, hdr)
			if err != nil {
				return err
			}
			if r.Status == 200 {
				c.ack(campaignAck{key: key, device: d.id, task: task, types: []events.Type{events.EvTaskReleased}})
			}
			continue
		}
		r, key, err := c.post(path+"start", d.token,
			map[string]any{"device_id": d.id, "claim_generation": gen, "expected_version": version}, hdr)
		if err != nil {
			return err
		}
		if r.Status != 200 {
			continue // canceled by the operator meanwhile
		}
		c.ack(campaignAck{key: key, device: d.id, task: task, types: []events.Type{events.EvTaskStarted}})
		exec, version := nodetest.Str(r.JSON(), "execution_id"), nodetest.Num(r.JSON(), "version")
		ok := true
		for i := range 1 + rng.IntN(3) {
			r, key, err := c.post(path+"heartbeat", d.token, map[string]any{"device_id": d.id, "claim_generation": gen,
				"execution_id": exec, "step": fmt.Sprintf("step-%d", i)}, hdr)
			if err != nil {
				return err
			}
			if ok = r.Status == 200; !ok {
				break
			}
			c.ack(campaignAck{key: key, device: d.id, task: task, types: []events.Type{events.EvTaskHeartbeat}})
		}
		if !ok {
			continue
		}
		r, key, err = c.post(path+"complete", d.token, map[string]any{"device_id": d.id, "claim_generation": gen,
			"execution_id": exec, "expected_version": version, "result": map[string]any{"ok": true}}, hdr)
		if err != nil {
			return err
		}
		if r.Status != 200 {
			return fmt.Errorf("complete %s: %s", task, r)
		}
		c.ack(campaignAck{key: key, device: d.id, task: task, types: []events.Type{events.EvTaskCompleted}})
	}
	return nil
}

// waitForWork waits for the next acknowledged command (a creation among
// them) or the end of the campaign.
func (c *campaign) waitForWork() {
	select {
	case <-c.stop:
	case <-c.load.ackSignal:
	}
}

// operator creates tasks (keeping the queue supplied) and cancels one now
// and then, until the campaign stops.
func (c *campaign) operator(admin string, rng *rand.Rand) error {
	for i := 0; !c.stopped(); i++ {
		if i%5 == 4 {
			c.mu.Lock()
			task := c.tasks[rng.IntN(len(c.tasks))]
			c.mu.Unlock()
			a, key, err := c.post("/api/v1/admin/tasks/"+task+"/cancel", admin, map[string]any{"reason": "campaign"}, nil)
			if err != nil {
				return err
			}
			if a.Status == 200 {
				c.ack(campaignAck{key: key, task: task, types: []events.Type{events.EvTaskCanceled, events.EvTaskCancelRequested}})
			}
			continue
		}
		a, key, err := c.post("/api/v1/admin/tasks", admin,
			map[string]any{"payload": map[string]any{"n": i}, "authorize": map[string]any{"ttl_seconds": 3600}}, nil)
		if err != nil {
			return err
		}
		if a.Status != 201 {
			return fmt.Errorf("create: %s", a)
		}
		c.ack(campaignAck{key: key, task: nodetest.Str(a.JSON(), "id"), types: []events.Type{events.EvTaskCreated}})
	}
	return nil
}

func TestCrashCampaign(t *testing.T) {
	dir := t.TempDir()
	runCampaign(t, *campaignKills, campaignFault{name: "kills", serve: dir, check: dir})
}

// campaignFault is what happens to the server at each fault of a campaign:
// always a SIGKILL; then, when after is set, more (a power cut). The server
// serves its data from serve; verify and the log check read check.
type campaignFault struct {
	name         string
	serve, check string
	after        func(t *testing.T) // with the server dead, before the checks
	again        func(t *testing.T) // after the checks, before the restart
}

// runCampaign drives the campaign's load through faults faults.
func runCampaign(t *testing.T, faults int, f campaignFault) {
	const devices = 12
	seed := uint64(time.Now().UnixNano()) //tl:wallclock the campaign's seed
	rng := rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15))
	t.Logf("random seed %d, %d %s", seed, faults, f.name)
	began := time.Now() //tl:wallclock campaign duration

	live := &liveServer{s: startServer(t, f.serve), changed: make(chan struct{})}
	admin := live.s.Admin
	c := &campaign{load: &crashLoad{live: live, c: proc.NewClient(), ackSignal: make(chan struct{}, 1)}, stop: make(chan struct{})}
	devs := make([]crashDevice, devices)
	for i := range devs {
		a, key, err := c.post("/api/v1/admin/devices", admin,
			map[string]any{"owner_id": uuid.NewString(), "name": fmt.Sprintf("campaign-%d", i)}, nil)
		if err != nil || a.Status != 201 {
			t.Fatalf("register device: %v %v", err, a)
		}
		m := a.JSON()
		devs[i] = crashDevice{id: nodetest.Str(m, "device_id"), token: nodetest.Str(m, "token"), session: uuid.NewString()}
		c.ack(campaignAck{key: key, device: devs[i].id, types: []events.Type{events.EvDeviceRegistered}})
	}
	a, key, err := c.post("/api/v1/admin/tasks", admin,
		map[string]any{"payload": map[string]any{"n": -1}, "authorize": map[string]any{"ttl_seconds": 3600}}, nil)
	if err != nil || a.Status != 201 {
		t.Fatalf("create: %v %v", err, a)
	}
	c.ack(campaignAck{key: key, task: nodetest.Str(a.JSON(), "id"), types: []events.Type{events.EvTaskCreated}})

	errs := make(chan error, devices+1)
	var wg sync.WaitGroup
	for i, d := range devs {
		wg.Go(func() { errs <- c.device(d, rand.New(rand.NewPCG(seed, uint64(i)))) })
	}
	wg.Go(func() { errs <- c.operator(admin, rand.New(rand.NewPCG(seed, 99))) })
	compared, comparisons := 0, 0
	for k := 1; k <= faults; k++ {
		// After a random number (10–79) of further acknowledgements.
		target := c.load.count.Load() + 10 + rng.Int64N(70)
		for c.load.count.Load() < target {
			select {
			case <-c.load.ackSignal:
			case err := <-errs: // a client stopped before the campaign did
				close(c.stop)
				t.Fatalf("load: %v", err)
			}
		}
		live.s.Kill()
		c.mu.Lock()
		acks := append([]campaignAck(nil), c.acks...)
		c.mu.Unlock()
		if f.after != nil {
			f.after(t)
		}
		if res := proc.CLI(t, "verify", "--data", f.check); res.Code != 0 {
			t.Fatalf("verify after fault %d: exit %d\n%s%s", k, res.Code, res.Stdout, res.Stderr)
		}
		checkCampaignLog(t, f.check, acks, false)
		compared = len(acks)
		comparisons += len(acks)
		if t.Failed() {
			t.Fatalf("after fault %d", k)
		}
		if f.again != nil {
			f.again(t)
		}
		live.replace(startServer(t, f.serve))
	}
	close(c.stop)
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Error(err)
		}
	}
	if t.Failed() {
		t.FailNow()
	}
	if code := live.s.Stop(t); code != 0 {
		t.Fatalf("final serve exited %d after SIGTERM\n%s", code, live.s.Stderr())
	}
	if res := proc.CLI(t, "verify", "--data", f.serve); res.Code != 0 {
		t.Fatalf("final verify: exit %d\n%s%s", res.Code, res.Stdout, res.Stderr)
	}
	checkedEvents := checkCampaignLog(t, f.serve, c.acks, true)
	t.Logf("campaign: %d %s in %v; %d acknowledged commands compared at the last fault (%d comparisons over all faults), "+
		"%d at the end; %d events; %d lost answers retried, %d replayed 2xx, %d device_not_ready after restarts",
		faults, f.name, time.Since(began).Round(time.Millisecond), compared, comparisons, len(c.acks), checkedEvents, //tl:wallclock
		c.load.lost.Load(), c.load.replayed.Load(), c.load.notReady.Load())
}

// checkCampaignLog opens the (stopped) ledger read-only and checks that
// every acknowledged command is in it, and that no task was ever held by
// two devices at once, and that no key records two events. When final (every
// command was answered) it also checks that every keyed event is an
// acknowledged command. It returns the number of events.
func checkCampaignLog(t *testing.T, dir string, acks []campaignAck, final bool) int {
	t.Helper()
	store, err := ledger.Open(dir, ledger.Options{ReadOnly: true})
	if err != nil {
		t.Fatalf("open ledger read-only: %v", err)
	}
	defer store.Close()
	type rec struct {
		typ          events.Type
		task, device string
		seq          uint64
	}
	byKey := map[string]rec{}
	holder := map[string]string{} // task → device holding it (claim or execution)
	started := map[string]bool{}
	n := 0
	err = store.Range(0, func(e *ledger.Event) error {
		n++
		body, err := events.DecodeBody(e.Type, e.Schema, e.Body)
		if err != nil {
			return fmt.Errorf("seq %d: %v", e.Seq, err)
		}
		raw, _ := json.Marshal(body)
		var f struct {
			TaskID   string `json:"task_id"`
			DeviceID string `json:"device_id"`
		}
		_ = json.Unmarshal(raw, &f)
		if e.Idem != nil {
			if prev, dup := byKey[e.Idem.Key]; dup {
				return fmt.Errorf("key %s used by seq %d and %d", e.Idem.Key, prev.seq, e.Seq)
			}
			byKey[e.Idem.Key] = rec{typ: e.Type, task: f.TaskID, device: f.DeviceID, seq: e.Seq}
		}
		switch e.Type {
		case events.EvTaskClaimed:
			// The campaign never advances the clock: no claim lease expires,
			// so a task is claimed only when nobody holds it.
			if cur := holder[f.TaskID]; cur != "" {
				return fmt.Errorf("seq %d: task %s claimed by %s while %s held it", e.Seq, f.TaskID, f.DeviceID, cur)
			}
			holder[f.TaskID] = f.DeviceID
		case events.EvTaskStarted, events.EvTaskHeartbeat, events.EvTaskCompleted, events.EvTaskReleased:
			if cur := holder[f.TaskID]; cur != f.DeviceID {
				return fmt.Errorf("seq %d: %s of task %s by %s, held by %q", e.Seq, e.Type, f.TaskID, f.DeviceID, cur)
			}
			started[f.TaskID] = started[f.TaskID] || e.Type == events.EvTaskStarted
			if e.Type == events.EvTaskCompleted || e.Type == events.EvTaskReleased {
				delete(holder, f.TaskID)
			}
		case events.EvTaskCanceled:
			delete(holder, f.TaskID)
		}
		return nil
	})
	if err != nil {
		t.Errorf("log: %v", err)
		return n
	}
	soft := map[string]bool{}
	for _, prefix := range []string{projections.SoftIdemAtPrefix, projections.SoftIdemPrefix} {
		if err := store.SoftRecords(prefix, func(k string, v []byte) error {
			r, err := projections.DecodeSoftIdem(k, v)
			if err == nil {
				soft[projections.IdemID(r.Scope, r.Key)] = true
			}
			return err
		}); err != nil {
			t.Fatal(err)
		}
	}
	acked := map[string]bool{}
	for _, a := range acks {
		acked[a.key] = true
		if len(a.types) == 0 {
			if !soft[projections.IdemID("device:"+a.device+":claim-next", a.key)] {
				t.Errorf("acknowledged 204 of device %s (key %s) has no recorded outcome", a.device, a.key)
			}
			continue
		}
		r, ok := byKey[a.key]
		if !ok {
			t.Errorf("acknowledged %v (key %s, task %s) is not in the log", a.types, a.key, a.task)
			continue
		}
		match := false
		for _, typ := range a.types {
			match = match || typ == r.typ
		}
		if !match || (a.task != "" && r.task != a.task) || (a.device != "" && r.device != a.device && r.typ != events.EvTaskCanceled) {
			t.Errorf("key %s: acknowledged %v of task %s by %s, log has %s of task %s by %s at seq %d",
				a.key, a.types, a.task, a.device, r.typ, r.task, r.device, r.seq)
		}
	}
	if final {
		for k, r := range byKey {
			if !acked[k] {
				t.Errorf("seq %d (%s) has key %s that no answer acknowledged", r.seq, r.typ, k)
			}
		}
	}
	return n
}
