package main_test

// Claim races and claim/release churn over real HTTP:
// 64 devices racing for one task; 64 devices looping over 200 tasks, then
// verify and an independent fold of the log's events.

import (
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"

	"taskledger/node/nodetest"
	"taskledger/node/nodetest/proc"
)

// readyDevices registers n devices and sends each a presence heartbeat.
func readyDevices(t *testing.T, n *nodetest.Node, count int) []*nodetest.Device {
	t.Helper()
	devs := make([]*nodetest.Device, count)
	for i := range devs {
		devs[i] = n.RegisterDevice()
		nodetest.Must(t, devs[i].Ready(), 200)
	}
	return devs
}

// createTasks creates count authorized tasks concurrently (group commit
// batches them) and returns their ids.
func createTasks(t *testing.T, c *proc.Client, base, admin string, count int) []string {
	t.Helper()
	ids := make([]string, count)
	errs := make(chan error, count)
	var wg sync.WaitGroup
	for i := range ids {
		wg.Add(1)
		go func() {
			defer wg.Done()
			a, err := c.Do(base, "POST", "/api/v1/admin/tasks", admin,
				map[string]any{"payload": map[string]any{"n": i}, "authorize": map[string]any{"ttl_seconds": 3600}}, nil)
			if err != nil {
				errs <- err
				return
			}
			if a.Status != 201 {
				errs <- fmt.Errorf("create task: %s", a)
				return
			}
			ids[i] = nodetest.Str(a.JSON(), "id")
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	return ids
}

// claimNext sends claim-next for a device with the given key and token.
func claimNext(c *proc.Client, base string, d *nodetest.Device, key, token string) (*nodetest.Resp, error) {
	return c.Do(base, "POST", "/api/v1/device/tasks/claim-next", d.Token,
		map[string]any{"device_id": d.ID, "session_id": d.Session},
		map[string]string{"Idempotency-Key": key, "X-Claim-Token": token})
}

// release sends release for a claim.
func release(c *proc.Client, base, devToken, devID, taskID, token, key string, gen, version uint64) (*nodetest.Resp, error) {
	return c.Do(base, "POST", "/api/v1/device/tasks/"+taskID+"/release", devToken,
		map[string]any{"device_id": devID, "claim_generation": gen, "expected_version": version},
		map[string]string{"Idempotency-Key": key, "X-Claim-Token": token})
}

func TestE2EClaimRace64DevicesOneTask(t *testing.T) {
	n := nodetest.Start(t)
	c := proc.NewClient()
	devs := readyDevices(t, n, 64)
	task := n.CreateTask(map[string]any{"race": true})

	type outcome struct {
		dev *nodetest.Device
		a   *nodetest.Resp
		err error
	}
	out := make([]outcome, len(devs))
	start := make(chan struct{})
	var wg sync.WaitGroup
	for i, d := range devs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			<-start
			a, err := claimNext(c, n.URL, d, uuid.NewString(), nodetest.NewClaimToken())
			out[i] = outcome{d, a, err}
		}()
	}
	close(start)
	wg.Wait()

	var winners []outcome
	noTask := 0
	for _, o := range out {
		switch {
		case o.err != nil:
			t.Fatalf("claim-next: %v", o.err)
		case o.a.Status == 200:
			winners = append(winners, o)
		case o.a.Status == 204:
			noTask++
			if o.a.Header.Get("Retry-After") != "2" || len(o.a.Body) != 0 {
				t.Errorf("204 answer: Retry-After %q, body %q", o.a.Header.Get("Retry-After"), o.a.Body)
			}
		default:
			t.Fatalf("claim-next: unexpected %s", o.a)
		}
	}
	if len(winners) != 1 || noTask != 63 {
		t.Fatalf("want exactly one 200 and sixty-three 204, got %d and %d", len(winners), noTask)
	}
	w := winners[0]
	if got := nodetest.Str(nodetest.Obj(w.a.JSON(), "task"), "id"); got != task {
		t.Fatalf("winner claimed %s, want %s", got, task)
	}
	claim := nodetest.Obj(n.Task(task), "claim")
	if nodetest.Str(claim, "device_id") != w.dev.ID || nodetest.Num(claim, "generation") != 1 {
		t.Fatalf("task claim %v, want device %s generation 1", claim, w.dev.ID)
	}
	evs := fetchEvents(t, c, n.URL, n.AdminToken)
	claims := 0
	for _, e := range evs {
		if e.Type == "task.claimed" {
			claims++
		}
	}
	if claims != 1 {
		t.Fatalf("%d task.claimed events, want 1", claims)
	}
}

func TestE2EChurn64DevicesClaimRelease(t *testing.T) {
	const devices, tasks, iterations = 64, 200, 20
	n := nodetest.Start(t)
	c := proc.NewClient()
	devs := readyDevices(t, n, devices)
	createTasks(t, c, n.URL, n.AdminToken, tasks)

	var mu sync.Mutex
	claimed, released, empty := 0, 0, 0
	errs := make(chan error, devices)
	var wg sync.WaitGroup
	for _, d := range devs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range iterations {
				tok := nodetest.NewClaimToken()
				a, err := claimNext(c, n.URL, d, uuid.NewString(), tok)
				if err != nil {
					errs <- err
					return
				}
				if a.Status == 204 {
					mu.Lock()
					empty++
					mu.Unlock()
					continue
				}
				if a.Status != 200 {
					errs <- fmt.Errorf("claim-next: %s", a)
					return
				}
				m := a.JSON()
				id := nodetest.Str(nodetest.Obj(m, "task"), "id")
				r, err := release(c, n.URL, d.Token, d.ID, id, tok, uuid.NewString(), nodetest.Num(m, "claim_generation"), nodetest.Num(m, "version"))
				if err != nil {
					errs <- err
					return
				}
				if r.Status != 200 || nodetest.Str(r.JSON(), "state") != "PENDING" {
					errs <- fmt.Errorf("release %s: %s", id, r)
					return
				}
				mu.Lock()
				claimed++
				released++
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	if claimed+empty != devices*iterations {
		t.Fatalf("claims %d + no-task %d != %d", claimed, empty, devices*iterations)
	}

	// An independent fold of the log's events, read over HTTP.
	evs := fetchEvents(t, c, n.URL, n.AdminToken)
	st := checkOwnership(t, evs)
	if st.claims != claimed || st.releases != released {
		t.Fatalf("log holds %d claims and %d releases; devices were answered %d and %d",
			st.claims, st.releases, claimed, released)
	}
	t.Logf("churn: %d devices × %d iterations over %d tasks: %d claims, %d releases, %d no-task answers, %d events",
		devices, iterations, tasks, claimed, released, empty, len(evs))

	// The nodetest cleanup runs node.Verify and compares replay with live
	// projections; then the real binary's verify must pass on the same log.
	n.Close()
	res := proc.CLI(t, "verify", "--data", n.Dir)
	if res.Code != 0 || !strings.HasPrefix(res.Stdout, "ok: ") {
		t.Fatalf("taskledger verify: exit %d\nstdout: %s\nstderr: %s", res.Code, res.Stdout, res.Stderr)
	}
}

// ownEvent is what the ownership fold needs of one event.
type ownEvent struct {
	Seq      uint64
	Type     string
	At       int64 // ms
	TaskID   string
	DeviceID string
	Gen      uint64
	LeaseExp int64 // ms; claims only
}

// fetchEvents pages through GET /api/v1/admin/events.
func fetchEvents(t *testing.T, c *proc.Client, base, admin string) []ownEvent {
	t.Helper()
	var out []ownEvent
	after := uint64(0)
	for {
		a, err := c.Do(base, "GET", fmt.Sprintf("/api/v1/admin/events?after=%d&limit=1000", after), admin, nil, nil)
		if err != nil || a.Status != 200 {
			t.Fatalf("events after %d: %v %v", after, err, a)
		}
		m := a.JSON()
		list, _ := m["events"].([]any)
		for _, raw := range list {
			e := raw.(map[string]any)
			b := nodetest.Obj(e, "body")
			oe := ownEvent{Seq: nodetest.Num(e, "seq"), Type: nodetest.Str(e, "type"), At: msTime(t, nodetest.Str(e, "at")),
				TaskID: nodetest.Str(b, "task_id"), DeviceID: nodetest.Str(b, "device_id"), Gen: nodetest.Num(b, "claim_generation")}
			if oe.Type == "task.claimed" {
				oe.LeaseExp = msTime(t, nodetest.Str(b, "lease_expires_at"))
			}
			if oe.Seq != uint64(len(out))+1 {
				t.Fatalf("events: seq %d after %d events", oe.Seq, len(out))
			}
			out = append(out, oe)
		}
		next := nodetest.Num(m, "next_after")
		if len(list) == 0 || next == after {
			return out
		}
		after = next
	}
}

func msTime(t *testing.T, s string) int64 {
	t.Helper()
	tm, err := time.Parse(time.RFC3339Nano, s)
	if err != nil {
		t.Fatalf("time %q: %v", s, err)
	}
	return tm.UnixMilli()
}

// ownership is the result of the fold.
type ownership struct {
	claims, releases int
}

// checkOwnership folds claim and release events and fails the test if a
// task was claimed while another device's claim on it was unexpired, if a
// device held two open tasks, if a release names a claim that is not the
// open one, or if generations do not increase by one per claim.
func checkOwnership(t *testing.T, evs []ownEvent) ownership {
	t.Helper()
	type claim struct {
		dev      string
		gen      uint64
		leaseExp int64
	}
	owner := map[string]*claim{} // task → open claim
	open := map[string]string{}  // device → task of its open claim
	gens := map[string]uint64{}  // task → last generation
	var st ownership
	for _, e := range evs {
		switch e.Type {
		case "task.claimed":
			st.claims++
			if cur := owner[e.TaskID]; cur != nil {
				if cur.dev != e.DeviceID && e.At < cur.leaseExp {
					t.Fatalf("seq %d: task %s claimed by %s while %s's claim (generation %d) was unexpired",
						e.Seq, e.TaskID, e.DeviceID, cur.dev, cur.gen)
				}
				delete(open, cur.dev)
			}
			if other, ok := open[e.DeviceID]; ok && other != e.TaskID {
				if c := owner[other]; c != nil && e.At < c.leaseExp {
					t.Fatalf("seq %d: device %s claimed %s while it held %s", e.Seq, e.DeviceID, e.TaskID, other)
				}
			}
			if e.Gen != gens[e.TaskID]+1 {
				t.Fatalf("seq %d: task %s claimed with generation %d after %d", e.Seq, e.TaskID, e.Gen, gens[e.TaskID])
			}
			gens[e.TaskID] = e.Gen
			owner[e.TaskID] = &claim{dev: e.DeviceID, gen: e.Gen, leaseExp: e.LeaseExp}
			open[e.DeviceID] = e.TaskID
		case "task.released":
			st.releases++
			cur := owner[e.TaskID]
			if cur == nil || cur.dev != e.DeviceID || cur.gen != e.Gen {
				t.Fatalf("seq %d: release of %s by %s generation %d, open claim %+v", e.Seq, e.TaskID, e.DeviceID, e.Gen, cur)
			}
			delete(owner, e.TaskID)
			delete(open, e.DeviceID)
		case "task.created", "device.registered":
		default:
			t.Fatalf("seq %d: unexpected event %s in a claim/release run", e.Seq, e.Type)
		}
	}
	return st
}
