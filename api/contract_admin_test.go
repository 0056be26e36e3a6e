package api_test

import (
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"taskledger/node/nodetest"
)

// POST /admin/devices: 201 {device_id, owner_id, name, required_checks,
// token} with the token shown once; required_checks defaults to the
// server's list, and a given list (even empty) replaces it.
func TestContractAdminRegisterDevice(t *testing.T) {
	n := nodetest.Start(t)
	owner := nodetest.NewID()
	for _, tc := range []struct {
		checks any
		want   []string
	}{
		{nil, []string{"accessibility_connected", "target_app_installed"}},
		{[]string{"camera_ok"}, []string{"camera_ok"}},
		{[]string{}, []string{}},
	} {
		body := map[string]any{"owner_id": owner, "name": "Pixel 8"}
		if tc.checks != nil {
			body["required_checks"] = tc.checks
		}
		r := n.Do("POST", nodetest.AdminPath+"/devices", n.AdminToken, body, nil)
		nodetest.Must(t, r, http.StatusCreated)
		m := r.JSON()
		tok := nodetest.Str(m, "token")
		if nodetest.Str(m, "owner_id") != owner || nodetest.Str(m, "name") != "Pixel 8" || !strings.HasPrefix(tok, "tldev_") || len(tok) != 49 {
			t.Fatalf("registration: %s", r.Body)
		}
		got := []string{}
		for _, c := range m["required_checks"].([]any) {
			got = append(got, c.(string))
		}
		if strings.Join(got, ",") != strings.Join(tc.want, ",") {
			t.Fatalf("required_checks %v, want %v", got, tc.want)
		}
		id := nodetest.Str(m, "device_id")
		doc := n.Do("GET", nodetest.AdminPath+"/devices/"+id, n.AdminToken, nil, nil)
		nodetest.Must(t, doc, http.StatusOK)
		nodetest.MustHoldNoSecret(t, "device document", doc.Body, tok)
		if nodetest.Str(doc.JSON(), "status") != "ACTIVE" {
			t.Fatalf("device document: %s", doc.Body)
		}
	}
	list := n.Do("GET", nodetest.AdminPath+"/devices", n.AdminToken, nil, nil)
	nodetest.Must(t, list, http.StatusOK)
	if len(list.JSON()["devices"].([]any)) != 3 {
		t.Fatalf("devices: %s", list.Body)
	}
	h := n.Head()
	n.MustRefuse(t, h, n.Do("GET", nodetest.AdminPath+"/devices/"+nodetest.NewID(), n.AdminToken, nil, nil), http.StatusNotFound, "device_not_found")
	n.MustRefuse(t, h, n.Do("GET", nodetest.AdminPath+"/devices/nope", n.AdminToken, nil, nil), http.StatusNotFound, "device_not_found")
	n.MustRefuse(t, h, n.Do("POST", nodetest.AdminPath+"/devices/"+nodetest.NewID()+"/revoke", n.AdminToken, map[string]any{"reason": "x"}, nil), http.StatusNotFound, "device_not_found")
}

// POST /admin/tasks: 201 task detail, with or without an authorization;
// the authorize TTL must lie within 15 min – 720 h (422 invalid_ttl,
// nothing appended); POST …/authorize likewise, plus revision_mismatch,
// task_not_found and invalid_state for a live claim.
func TestContractAdminCreateAndAuthorize(t *testing.T) {
	n := nodetest.Start(t)
	r := n.Do("POST", nodetest.AdminPath+"/tasks", n.AdminToken, map[string]any{"payload": map[string]any{"b": []any{1, "x"}, "a": nil}}, nil)
	nodetest.Must(t, r, http.StatusCreated)
	m := r.JSON()
	for _, k := range []string{"id", "state", "version", "revision", "payload", "created_at", "updated_at", "reference_image",
		"authorization", "claim", "execution", "cancel_requested", "result", "failure", "late_reports", "evidence", "recovery"} {
		if _, ok := m[k]; !ok {
			t.Fatalf("task detail lacks %q: %s", k, r.Body)
		}
	}
	if nodetest.Str(m, "state") != "PENDING" || nodetest.Num(m, "version") != 1 || nodetest.Num(m, "revision") != 1 ||
		m["authorization"] != nil || m["claim"] != nil || m["cancel_requested"] != false {
		t.Fatalf("created task: %s", r.Body)
	}
	if !strings.HasSuffix(nodetest.Str(m, "created_at"), "Z") || len(nodetest.Str(m, "created_at")) != len("2026-11-30T08:15:00.123Z") {
		t.Fatalf("created_at format: %s", nodetest.Str(m, "created_at"))
	}
	id := nodetest.Str(m, "id")

	h := n.Head()
	for _, ttl := range []int64{899, 2592001, 1, 0, -5, 60} {
		r := n.Do("POST", nodetest.AdminPath+"/tasks", n.AdminToken, map[string]any{"payload": map[string]any{"a": 1},
			"authorize": map[string]any{"ttl_seconds": ttl}}, nil)
		n.MustRefuse(t, h, r, http.StatusUnprocessableEntity, "invalid_ttl")
		r = n.Do("POST", nodetest.AdminPath+"/tasks/"+id+"/authorize", n.AdminToken, map[string]any{"expected_revision": 1, "ttl_seconds": ttl}, nil)
		n.MustRefuse(t, h, r, http.StatusUnprocessableEntity, "invalid_ttl")
		// Validation comes before state: even for a task that does not exist.
		r = n.Do("POST", nodetest.AdminPath+"/tasks/"+nodetest.NewID()+"/authorize", n.AdminToken, map[string]any{"expected_revision": 1, "ttl_seconds": ttl}, nil)
		n.MustRefuse(t, h, r, http.StatusUnprocessableEntity, "invalid_ttl")
	}
	n.MustRefuse(t, h, n.Do("POST", nodetest.AdminPath+"/tasks/"+nodetest.NewID()+"/authorize", n.AdminToken, map[string]any{"expected_revision": 1, "ttl_seconds": 900}, nil),
		http.StatusNotFound, "task_not_found")

	n.MustRefuse(t, h, n.Do("POST", nodetest.AdminPath+"/tasks/"+id+"/authorize", n.AdminToken, map[string]any{"expected_revision": 2, "ttl_seconds": 900}, nil),
		http.StatusConflict, "revision_mismatch")

	// The bounds themselves are accepted.
	for _, ttl := range []int64{900, 2592000} {
		r := n.Do("POST", nodetest.AdminPath+"/tasks", n.AdminToken, map[string]any{"payload": map[string]any{"a": 1},
			"authorize": map[string]any{"ttl_seconds": ttl}}, nil)
		nodetest.Must(t, r, http.StatusCreated)
		a := r.JSON()["authorization"].(map[string]any)
		created, _ := time.Parse(time.RFC3339, nodetest.Str(r.JSON(), "created_at"))
		exp, _ := time.Parse(time.RFC3339, nodetest.Str(a, "expires_at"))
		if nodetest.Str(a, "status") != "ACTIVE" || nodetest.Num(a, "revision") != 1 || nodetest.Str(a, "id") == "" ||
			exp.Sub(created) != time.Duration(ttl)*time.Second {
			t.Fatalf("authorization %v", a)
		}
	}
	r = n.Do("POST", nodetest.AdminPath+"/tasks/"+id+"/authorize", n.AdminToken, map[string]any{"expected_revision": 1, "ttl_seconds": 2592000}, nil)
	nodetest.Must(t, r, http.StatusOK)
	if a := r.JSON()["authorization"].(map[string]any); nodetest.Str(a, "status") != "ACTIVE" || nodetest.Num(r.JSON(), "version") != 1 {
		t.Fatalf("authorize: %s", r.Body)
	}

	// The authorized task is claimable; while the claim lives, authorize
	// is refused (invalid_state).
	d := n.ReadyDevice(t)
	got, _, _ := d.MustClaim(t)
	h = n.Head()
	n.MustRefuse(t, h, n.Do("POST", nodetest.AdminPath+"/tasks/"+got+"/authorize", n.AdminToken, map[string]any{"expected_revision": 1, "ttl_seconds": 900}, nil),
		http.StatusConflict, "invalid_state")

}

// Task detail, task events, global events and device documents never
// show a device, admin or claim token or its SHA-256; the task's events
// come in seq order with {seq, type, schema, at, actor, body}; the global
// log pages with after/limit/next_after.
func TestContractAdminReadsNoSecretsAndEvents(t *testing.T) {
	n := nodetest.Start(t)
	d := n.ReadyDevice(t)
	a := n.CreateTask(map[string]any{"job": "post photo"})
	_, tok, claim := d.MustClaim(t)
	nodetest.MustHoldNoSecret(t, "claim answer", claim.Body, tok, d.Token, n.AdminToken)
	ex := d.MustStart(t, a, tok, 1, 2)
	nodetest.Must(t, d.Call(a, "heartbeat", tok, map[string]any{"claim_generation": 1, "execution_id": ex, "step": "s1"}, ""), http.StatusOK)
	nodetest.Must(t, n.Cancel(a), http.StatusOK)
	nodetest.Must(t, d.Call(a, "cancel-ack", tok, map[string]any{"claim_generation": 1, "execution_id": ex, "expected_version": 3}, ""), http.StatusOK)
	b := n.CreateTask(nil)
	_, tok2, _ := d.MustClaim(t)
	secrets := []string{tok, tok2, d.Token, n.AdminToken}

	for _, path := range []string{"/tasks/" + a, "/tasks/" + b, "/tasks/" + a + "/events", "/tasks/" + b + "/events",
		"/devices/" + d.ID, "/devices", "/tasks", "/events?limit=1000"} {
		r := n.Do("GET", nodetest.AdminPath+path, n.AdminToken, nil, nil)
		nodetest.Must(t, r, http.StatusOK)
		nodetest.MustHoldNoSecret(t, path, r.Body, secrets...)
	}

	// Task events in seq order.
	r := n.Do("GET", nodetest.AdminPath+"/tasks/"+a+"/events", n.AdminToken, nil, nil)
	nodetest.Must(t, r, http.StatusOK)
	want := []string{"task.created", "task.claimed", "task.started", "task.heartbeat", "task.cancel_requested", "task.canceled"}
	evs := r.JSON()["events"].([]any)
	if len(evs) != len(want) {
		t.Fatalf("task events: %s", r.Body)
	}
	last := uint64(0)
	for i, e := range evs {
		m := e.(map[string]any)
		if nodetest.Str(m, "type") != want[i] || nodetest.Num(m, "seq") <= last || nodetest.Num(m, "schema") < 1 || nodetest.Str(m, "at") == "" {
			t.Fatalf("event %d: %v", i, m)
		}
		for _, k := range []string{"seq", "type", "schema", "at", "actor", "body"} {
			if _, ok := m[k]; !ok {
				t.Fatalf("event lacks %q: %v", k, m)
			}
		}
		last = nodetest.Num(m, "seq")
		actor := m["actor"].(map[string]any)
		kind := nodetest.Str(actor, "kind")
		if (i == 0 || i == 4) != (kind == "operator") {
			t.Fatalf("event %d actor %v", i, actor)
		}
		if kind == "device" && (nodetest.Str(actor, "id") != d.ID || nodetest.Str(actor, "owner") != d.OwnerID) {
			t.Fatalf("device actor %v", actor)
		}
	}
	n.MustRefuse(t, n.Head(), n.Do("GET", nodetest.AdminPath+"/tasks/"+nodetest.NewID()+"/events", n.AdminToken, nil, nil), http.StatusNotFound, "task_not_found")

	// Global events: dense seq from 1, paged.
	head := n.Head()
	var seqs []uint64
	after := uint64(0)
	for pages := 0; ; pages++ {
		if pages > int(head) {
			t.Fatalf("paging does not end")
		}
		r := n.Do("GET", nodetest.AdminPath+"/events?after="+strconv.FormatUint(after, 10)+"&limit=3", n.AdminToken, nil, nil)
		nodetest.Must(t, r, http.StatusOK)
		m := r.JSON()
		evs := m["events"].([]any)
		if len(evs) > 3 {
			t.Fatalf("limit ignored: %d events", len(evs))
		}
		for _, e := range evs {
			em := e.(map[string]any)
			for _, k := range []string{"seq", "stream", "stream_version", "type", "schema", "at", "actor", "body"} {
				if _, ok := em[k]; !ok {
					t.Fatalf("global event lacks %q: %v", k, em)
				}
			}
			seqs = append(seqs, nodetest.Num(em, "seq"))
		}
		next := nodetest.Num(m, "next_after")
		if len(evs) == 0 {
			if next != after {
				t.Fatalf("empty page next_after %d, want %d", next, after)
			}
			break
		}
		if next != seqs[len(seqs)-1] {
			t.Fatalf("next_after %d, last seq %d", next, seqs[len(seqs)-1])
		}
		after = next
	}
	if uint64(len(seqs)) != head {
		t.Fatalf("paged %d events, head %d", len(seqs), head)
	}
	for i, s := range seqs {
		if s != uint64(i+1) {
			t.Fatalf("seq %d at %d", s, i)
		}
	}
	// Stream versions count inside a stream.
	r = n.Do("GET", nodetest.AdminPath+"/events?after=0&limit=1000", n.AdminToken, nil, nil)
	versions := map[string]uint64{}
	for _, e := range r.JSON()["events"].([]any) {
		em := e.(map[string]any)
		s := nodetest.Str(em, "stream")
		versions[s]++
		if nodetest.Num(em, "stream_version") != versions[s] {
			t.Fatalf("stream %s version %d, want %d", s, nodetest.Num(em, "stream_version"), versions[s])
		}
	}
	if versions["task/"+a] != 6 {
		t.Fatalf("stream task/%s has %d events", a, versions["task/"+a])
	}
	h := n.Head()
	for _, q := range []string{"limit=0", "limit=1001", "after=-1", "after=x", "foo=1", "limit=1.5"} {
		n.MustRefuse(t, h, n.Do("GET", nodetest.AdminPath+"/events?"+q, n.AdminToken, nil, nil), http.StatusBadRequest, "invalid_request")
	}
}

// 404 task_not_found for every admin task route on an unknown id.
func TestContractAdminTaskNotFound(t *testing.T) {
	n := nodetest.Start(t)
	n.CreateTask(nil)
	h := n.Head()
	for _, id := range []string{nodetest.NewID(), "not-a-uuid"} {
		n.MustRefuse(t, h, n.Do("GET", nodetest.AdminPath+"/tasks/"+id, n.AdminToken, nil, nil), http.StatusNotFound, "task_not_found")
		n.MustRefuse(t, h, n.Do("GET", nodetest.AdminPath+"/tasks/"+id+"/events", n.AdminToken, nil, nil), http.StatusNotFound, "task_not_found")
		n.MustRefuse(t, h, n.Cancel(id), http.StatusNotFound, "task_not_found")
		n.MustRefuse(t, h, n.Do("POST", nodetest.AdminPath+"/tasks/"+id+"/authorize", n.AdminToken, map[string]any{"expected_revision": 1, "ttl_seconds": 900}, nil),
			http.StatusNotFound, "task_not_found")

	}
}

// The test clock: advance answers the new server time and moves leases;
// its bounds are 1..86400 seconds; without --clock=manual the route does
// not exist (404).
func TestContractAdminTestClock(t *testing.T) {
	n := nodetest.Start(t)
	r := n.Do("POST", nodetest.AdminPath+"/test-clock/advance", n.AdminToken, map[string]any{"seconds": 1}, nil)
	nodetest.Must(t, r, http.StatusOK)
	t0, err := time.Parse(time.RFC3339, nodetest.Str(r.JSON(), "server_time"))
	if err != nil || len(r.JSON()) != 1 {
		t.Fatalf("advance answer: %s", r.Body)
	}
	r = n.Do("POST", nodetest.AdminPath+"/test-clock/advance", n.AdminToken, map[string]any{"seconds": 86400}, nil)
	nodetest.Must(t, r, http.StatusOK)
	t1, _ := time.Parse(time.RFC3339, nodetest.Str(r.JSON(), "server_time"))
	if t1.Sub(t0) != 24*time.Hour {
		t.Fatalf("advanced %v", t1.Sub(t0))
	}
	id := n.CreateTask(nil)
	if created, _ := time.Parse(time.RFC3339, nodetest.Str(n.Task(id), "created_at")); !created.Equal(t1) {
		t.Fatalf("created_at %v, server time %v", created, t1)
	}

	w := nodetest.Start(t, nodetest.WithWallClock())
	h := w.Head()
	r = w.Do("POST", nodetest.AdminPath+"/test-clock/advance", w.AdminToken, map[string]any{"seconds": 60}, nil)
	if r.Status != http.StatusNotFound {
		t.Fatalf("wall clock advance: %d %s", r.Status, r.Body)
	}
	w.MustUnchanged(t, h)
}
