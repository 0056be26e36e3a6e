package main_test

// Crash safety of the real binary: concurrent
// claim/release load, SIGKILL at random moments, restart on the same data
// directory, and proof that every acknowledged command is in the log and
// that verify passes.

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/uuid"

	"taskledger/events"
	"taskledger/ledger"
	"taskledger/node/nodetest"
	"taskledger/projections"
)

// liveServer is the current server process across restarts.
type liveServer struct {
	mu      sync.Mutex
	s       *server
	changed chan struct{} // closed when s is replaced
}

func (l *liveServer) current() (string, chan struct{}) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.s.URL, l.changed
}

func (l *liveServer) replace(s *server) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.s = s
	close(l.changed)
	l.changed = make(chan struct{})
}

// crashAck is one acknowledged (2xx) command.
type crashAck struct {
	kind   string // register, create, claim, notask, release
	key    string // Idempotency-Key
	device string
	task   string
	gen    uint64
}

// crashLoad is the state shared by the devices of the crash test.
type crashLoad struct {
	live      *liveServer
	c         *client
	mu        sync.Mutex
	acks      []crashAck
	count     atomic.Int64
	ackSignal chan struct{} // capacity 1
	lost      atomic.Int64  // requests whose answer never arrived
	replayed  atomic.Int64  // 2xx answers marked Idempotent-Replayed
	notReady  atomic.Int64  // device_not_ready answers (presence lost at restart)
}

func (l *crashLoad) ack(a crashAck) {
	l.mu.Lock()
	l.acks = append(l.acks, a)
	l.mu.Unlock()
	l.count.Add(1)
	select {
	case l.ackSignal <- struct{}{}:
	default:
	}
}

// send sends a request until it gets an answer: a lost answer (the server
// was killed) is retried with the same Idempotency-Key on the restarted
// server. 503 is never expected (SIGKILL gives no graceful shutdown).
func (l *crashLoad) send(method, path, token string, body any, headers map[string]string) (*nodetest.Resp, error) {
	for {
		url, changed := l.live.current()
		a, err := l.c.do(url, method, path, token, body, headers)
		if err == nil {
			if a.Status == 503 {
				return nil, fmt.Errorf("%s %s: unexpected 503", method, path)
			}
			if a.Status/100 == 2 && a.Header.Get("Idempotent-Replayed") == "true" {
				l.replayed.Add(1)
			}
			return a, nil
		}
		l.lost.Add(1)
		select {
		case <-changed:
		case <-time.After(2 * time.Minute): // a safety net, not a timing assertion
			return nil, fmt.Errorf("%s %s: no restarted server after %v", method, path, err)
		}
	}
}

type crashDevice struct{ id, token, session string }

// run does cycles of claim → release; every command is retried with its
// key until answered, and only answers count as acknowledgements.
func (l *crashLoad) run(d crashDevice, cycles int) error {
	for range cycles {
		key, tok := uuid.NewString(), newClaimToken()
		var a *nodetest.Resp
		for {
			var err error
			a, err = l.send("POST", "/api/v1/device/tasks/claim-next", d.token,
				map[string]any{"device_id": d.id, "session_id": d.session},
				map[string]string{"Idempotency-Key": key, "X-Claim-Token": tok})
			if err != nil {
				return err
			}
			if a.Status != 409 || a.Code() != "device_not_ready" {
				break
			}
			// A restarted server waits for the next presence heartbeat;
			// device_not_ready is not recorded, so the same key is retried.
			l.notReady.Add(1)
			h, err := l.send("POST", "/api/v1/device/heartbeat", d.token, presenceBody(d.id), nil)
			if err != nil {
				return err
			}
			if h.Status != 200 {
				return fmt.Errorf("presence heartbeat: %s", h)
			}
		}
		switch a.Status {
		case 204:
			l.ack(crashAck{kind: "notask", key: key, device: d.id})
			continue
		case 200:
		default:
			return fmt.Errorf("claim-next: %s", a)
		}
		m := a.JSON()
		task, gen, version := str(obj(m, "task"), "id"), num(m, "claim_generation"), num(m, "version")
		if task == "" || gen == 0 {
			return fmt.Errorf("claim-next: %s", a)
		}
		l.ack(crashAck{kind: "claim", key: key, device: d.id, task: task, gen: gen})

		rkey := uuid.NewString()
		r, err := l.send("POST", "/api/v1/device/tasks/"+task+"/release", d.token,
			map[string]any{"device_id": d.id, "claim_generation": gen, "expected_version": version},
			map[string]string{"Idempotency-Key": rkey, "X-Claim-Token": tok})
		if err != nil {
			return err
		}
		if r.Status != 200 || str(r.JSON(), "state") != "PENDING" {
			return fmt.Errorf("release %s generation %d: %s", task, gen, r)
		}
		l.ack(crashAck{kind: "release", key: rkey, device: d.id, task: task, gen: gen})
	}
	return nil
}

func TestE2ECrashSIGKILLKeepsEveryAcknowledgedCommand(t *testing.T) {
	const devices, tasks, cycles, wantKills = 16, 12, 40, 8
	seed := uint64(time.Now().UnixNano())
	rng := rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15))
	t.Logf("random seed %d", seed)

	dir := t.TempDir()
	live := &liveServer{s: startServer(t, dir), changed: make(chan struct{})}
	admin := adminToken(t, dir)
	load := &crashLoad{live: live, c: newClient(), ackSignal: make(chan struct{}, 1)}

	// Set-up over HTTP: devices and tasks, each acknowledged command noted.
	devs := make([]crashDevice, devices)
	for i := range devs {
		key := uuid.NewString()
		a, err := load.send("POST", "/api/v1/admin/devices", admin,
			map[string]any{"owner_id": uuid.NewString(), "name": fmt.Sprintf("crash-%d", i)},
			map[string]string{"Idempotency-Key": key})
		if err != nil || a.Status != 201 {
			t.Fatalf("register device: %v %v", err, a)
		}
		m := a.JSON()
		devs[i] = crashDevice{id: str(m, "device_id"), token: str(m, "token"), session: uuid.NewString()}
		load.ack(crashAck{kind: "register", key: key, device: devs[i].id})
		h, err := load.send("POST", "/api/v1/device/heartbeat", devs[i].token, presenceBody(devs[i].id), nil)
		if err != nil || h.Status != 200 {
			t.Fatalf("presence: %v %v", err, h)
		}
	}
	for i := range tasks {
		key := uuid.NewString()
		a, err := load.send("POST", "/api/v1/admin/tasks", admin,
			map[string]any{"payload": map[string]any{"n": i}, "authorize": map[string]any{"ttl_seconds": 3600}},
			map[string]string{"Idempotency-Key": key})
		if err != nil || a.Status != 201 {
			t.Fatalf("create task: %v %v", err, a)
		}
		load.ack(crashAck{kind: "create", key: key, task: str(a.JSON(), "id")})
	}

	// The load.
	errs := make(chan error, devices)
	done := make(chan struct{})
	var wg sync.WaitGroup
	for _, d := range devs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if err := load.run(d, cycles); err != nil {
				errs <- fmt.Errorf("device %s: %w", d.id, err)
			}
		}()
	}
	go func() { wg.Wait(); close(done) }()

	// The killer: after a random number (30–139) of further acknowledged
	// commands, SIGKILL; verify the killed ledger; restart on the same dir.
	kills := 0
	killedAt := []int64{}
loop:
	for kills < wantKills {
		target := load.count.Load() + 30 + rng.Int64N(110)
		for load.count.Load() < target {
			select {
			case <-load.ackSignal:
			case <-done:
				break loop
			}
		}
		live.s.kill()
		kills++
		killedAt = append(killedAt, load.count.Load())
		if res := runCLI(t, "verify", "--data", dir); res.Code != 0 {
			t.Fatalf("verify after kill %d: exit %d\n%s%s", kills, res.Code, res.Stdout, res.Stderr)
		}
		live.replace(startServer(t, dir))
	}
	<-done
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	if t.Failed() {
		t.FailNow()
	}
	if kills < 5 {
		t.Fatalf("only %d kills happened before the load ended", kills)
	}
	if code := live.s.stop(); code != 0 {
		t.Fatalf("final serve exited %d after SIGTERM\n%s", code, live.s.Stderr.String())
	}
	if res := runCLI(t, "verify", "--data", dir); res.Code != 0 {
		t.Fatalf("final verify: exit %d\n%s%s", res.Code, res.Stdout, res.Stderr)
	}

	// Every acknowledged command is in the log, under its key.
	store, err := ledger.Open(dir, ledger.Options{ReadOnly: true})
	if err != nil {
		t.Fatalf("open ledger read-only: %v", err)
	}
	defer store.Close()
	byKey := map[string]*ledger.Event{}
	var own []ownEvent
	err = store.Range(0, func(e *ledger.Event) error {
		if e.Idem != nil {
			if prev := byKey[e.Idem.Key]; prev != nil {
				return fmt.Errorf("key %s used by seq %d and %d", e.Idem.Key, prev.Seq, e.Seq)
			}
			byKey[e.Idem.Key] = e
		}
		oe, err := ownEventOf(e)
		own = append(own, oe)
		return err
	})
	if err != nil {
		t.Fatalf("read log: %v", err)
	}
	soft := map[string]bool{}
	if err := store.SoftRecords("idem/", func(k string, _ []byte) error { soft[k] = true; return nil }); err != nil {
		t.Fatal(err)
	}
	counts := map[string]int{}
	acked := map[string]bool{}
	for _, a := range load.acks {
		counts[a.kind]++
		acked[a.key] = true
		if a.kind == "notask" {
			k := "idem/" + projections.IdemID("device:"+a.device+":claim-next", a.key)
			if !soft[k] {
				t.Errorf("acknowledged 204 of device %s (key %s) has no recorded outcome", a.device, a.key)
			}
			continue
		}
		e := byKey[a.key]
		if e == nil {
			t.Errorf("acknowledged %s (key %s, task %s, device %s) is not in the log", a.kind, a.key, a.task, a.device)
			continue
		}
		if err := matchAck(a, e); err != nil {
			t.Errorf("acknowledged %s (key %s) at seq %d: %v", a.kind, a.key, e.Seq, err)
		}
	}
	// Every command was eventually answered, so the log holds nothing else.
	for k, e := range byKey {
		if !acked[k] {
			t.Errorf("seq %d (%s) has key %s that no answer acknowledged", e.Seq, e.Type, k)
		}
	}
	st := checkOwnership(t, own)
	t.Logf("crash: %d kills (after %v acknowledged commands), %d acknowledged commands checked (%v), "+
		"%d events, %d claims/%d releases in the log, %d lost answers retried, %d replayed 2xx, %d device_not_ready after restarts",
		kills, killedAt, len(load.acks), counts, len(own), st.claims, st.releases, load.lost.Load(), load.replayed.Load(),
		load.notReady.Load())
}

// matchAck checks that the event under an acknowledged key is that command.
func matchAck(a crashAck, e *ledger.Event) error {
	want := map[string]string{"register": events.EvDeviceRegistered, "create": events.EvTaskCreated,
		"claim": events.EvTaskClaimed, "release": events.EvTaskReleased}[a.kind]
	if e.Type != want {
		return fmt.Errorf("event type %s, want %s", e.Type, want)
	}
	oe, err := ownEventOf(e)
	if err != nil {
		return err
	}
	switch a.kind {
	case "register":
		if oe.DeviceID != a.device {
			return fmt.Errorf("registered %s, want %s", oe.DeviceID, a.device)
		}
	case "create":
		if oe.TaskID != a.task {
			return fmt.Errorf("created %s, want %s", oe.TaskID, a.task)
		}
	default:
		if oe.TaskID != a.task || oe.DeviceID != a.device || oe.Gen != a.gen {
			return fmt.Errorf("task %s device %s generation %d, answered task %s device %s generation %d",
				oe.TaskID, oe.DeviceID, oe.Gen, a.task, a.device, a.gen)
		}
	}
	return nil
}

// ownEventOf decodes what the ownership fold needs from a stored event.
func ownEventOf(e *ledger.Event) (ownEvent, error) {
	oe := ownEvent{Seq: e.Seq, Type: e.Type, At: e.At}
	body, err := events.DecodeBody(e.Type, e.Schema, e.Body)
	if err != nil {
		return oe, err
	}
	switch b := body.(type) {
	case *events.TaskClaimed:
		oe.TaskID, oe.DeviceID, oe.Gen, oe.LeaseExp = b.TaskID, b.DeviceID, b.Generation, b.LeaseExpiresAt
	case *events.TaskReleased:
		oe.TaskID, oe.DeviceID, oe.Gen = b.TaskID, b.DeviceID, b.Generation
	case *events.TaskCreated:
		oe.TaskID = b.TaskID
	case *events.DeviceRegistered:
		oe.DeviceID = b.DeviceID
	default:
		return oe, errors.New("unexpected event type " + e.Type)
	}
	return oe, nil
}
