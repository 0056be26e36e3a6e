package api_test

import (
	"bytes"
	"testing"

	"taskledger/node/nodetest"
)

// recoverTask sends an operator recover with decision at version.
func (l *taskLife) recoverTask(t *testing.T, decision string, version uint64, key string) *nodetest.Resp {
	t.Helper()
	h := map[string]string{}
	if key != "" {
		h["Idempotency-Key"] = key
	}
	return l.n.Do("POST", "/api/v1/admin/tasks/"+l.id+"/recover", l.n.AdminToken,
		map[string]any{"decision": decision, "reason": "device went silent", "expected_version": version}, h)
}

func TestRecoverRequeue(t *testing.T) {
	l := driveTo(t, stRunning)
	n, old := l.n, *l
	hbKey := nodetest.NewKey()
	nodetest.Must(t, l.call(t, "heartbeat", hbKey), 200)

	// A live task is not recovered, whatever the decision.
	for _, dec := range []string{"requeue", "fail"} {
		l.mustRefuse(t, 409, "lease_not_expired", func() *nodetest.Resp { return l.recoverTask(t, dec, l.ver, "") })
	}
	l.mustRefuse(t, 400, "invalid_request", func() *nodetest.Resp { return l.recoverTask(t, "retry", l.ver, "") })
	n.Advance(n.Engine.Config().RunningLease)
	l.mustRefuse(t, 409, "version_mismatch", func() *nodetest.Resp { return l.recoverTask(t, "requeue", l.ver-1, "") })
	// Nothing happens automatically: the expired task keeps its state.
	if st := nodetest.Str(n.Task(l.id), "state"); st != "RUNNING" {
		t.Fatalf("expired task is %s", st)
	}

	key := nodetest.NewKey()
	r := l.recoverTask(t, "requeue", l.ver, key)
	nodetest.Must(t, r, 200)
	doc := r.JSON()
	rec, _ := doc["recovery"].(map[string]any)
	if nodetest.Str(doc, "state") != "PENDING" || nodetest.Num(doc, "version") != l.ver+1 || doc["claim"] != nil ||
		nodetest.Str(rec, "decision") != "requeue" || nodetest.Str(rec, "reason") != "device went silent" || nodetest.Str(rec, "at") == "" {
		t.Fatalf("recover answer %s", r.Body)
	}
	if auth, _ := doc["authorization"].(map[string]any); auth != nil && nodetest.Str(auth, "status") == "ACTIVE" {
		t.Fatalf("requeued task keeps an active authorization: %v", auth)
	}
	head := n.Head()
	again := l.recoverTask(t, "requeue", l.ver, key)
	nodetest.Must(t, again, 200)
	if again.Header.Get("Idempotent-Replayed") != "true" || n.Head() != head {
		t.Fatal("recover replay appended or was not marked")
	}
	l.mustRefuse(t, 409, "invalid_state", func() *nodetest.Resp { return l.recoverTask(t, "requeue", l.ver+1, "") })

	// Without a new authorization nobody can claim it.
	b := n.RegisterDevice()
	nodetest.Must(t, b.Ready(), 200)
	nothing, _ := b.Claim()
	nodetest.Must(t, nothing, 204)
	// The old device holds nothing any more.
	for _, op := range deviceOps {
		l.mustRefuse(t, 404, "claim_not_found", func() *nodetest.Resp { return old.call(t, op, "") })
	}
	nodetest.Must(t, old.image(t, nil), 404, "claim_not_found")
	// Replays about the recovered execution are no longer current.
	l.mustRefuse(t, 409, "claim_replay_expired", func() *nodetest.Resp { return old.call(t, "heartbeat", hbKey) })

	// A new authorization makes it claimable again, with a new execution.
	nodetest.Must(t, l.admin(t, "authorize", map[string]any{"expected_revision": l.rev, "ttl_seconds": 3600}), 200)
	nl := &taskLife{n: n, d: b, id: l.id, rev: l.rev}
	nl.claim(t)
	if nl.gen != old.gen+1 {
		t.Fatalf("new claim generation %d after %d", nl.gen, old.gen)
	}
	nl.must(t, "start")
	if nl.exec == old.exec || nl.exec == "" {
		t.Fatalf("new execution %q, old %q", nl.exec, old.exec)
	}
	// The old device's calls are refused: the task is another device's now.
	for _, op := range deviceOps {
		l.mustRefuse(t, 404, "claim_not_found", func() *nodetest.Resp { return old.call(t, op, "") })
	}
	nodetest.Must(t, old.image(t, nil), 404, "claim_not_found")
	nl.must(t, "complete")

	task := n.Task(l.id)
	if rec, _ := task["recovery"].(map[string]any); nodetest.Str(task, "state") != "SUCCEEDED" || nodetest.Str(rec, "decision") != "requeue" {
		t.Fatalf("task detail %v", task)
	}
	// One execution per authorization.
	auths, execs := map[string]bool{}, map[string]bool{}
	for _, e := range l.n.Events(t, l.id) {
		body := e["body"].(map[string]any)
		switch nodetest.Str(e, "type") {
		case "task.created":
			auths[nodetest.Str(body["authorization"].(map[string]any), "authorization_id")] = true
		case "task.authorized":
			auths[nodetest.Str(body["authorization"].(map[string]any), "authorization_id")] = true
		case "task.started":
			a := nodetest.Str(body, "authorization_id")
			if !auths[a] || execs[a] {
				t.Fatalf("execution %s under authorization %s (known %v, used %v)", nodetest.Str(body, "execution_id"), a, auths, execs)
			}
			execs[a] = true
		}
	}
	if len(execs) != 2 || len(auths) != 2 {
		t.Fatalf("%d executions under %d authorizations", len(execs), len(auths))
	}
}

func TestRecoverFail(t *testing.T) {
	l := driveTo(t, stWaiting)
	l.n.Advance(l.n.Engine.Config().RunningLease)
	r := l.recoverTask(t, "fail", l.ver, "")
	nodetest.Must(t, r, 200)
	doc := r.JSON()
	rec, _ := doc["recovery"].(map[string]any)
	if nodetest.Str(doc, "state") != "FAILED" || nodetest.Str(rec, "decision") != "fail" || doc["failure"] == nil {
		t.Fatalf("recover fail: %s", r.Body)
	}
	l.mustRefuse(t, 404, "claim_not_found", func() *nodetest.Resp { return l.call(t, "complete", "") })
	l.mustRefuse(t, 409, "invalid_state", func() *nodetest.Resp { return l.recoverTask(t, "fail", l.ver+1, "") })
}

func TestRecoverRevokedDevice(t *testing.T) {
	// A revoked device's task is recoverable at once, even with a live lease.
	for _, st := range []string{stClaimed, stRunning} {
		t.Run(st, func(t *testing.T) {
			l := driveTo(t, st)
			nodetest.Must(t, l.n.Do("POST", "/api/v1/admin/devices/"+l.d.ID+"/revoke", l.n.AdminToken,
				map[string]any{"reason": "lost"}, nil), 200)
			if nodetest.Str(l.n.Task(l.id), "state") != st {
				t.Fatal("revocation moved the task")
			}
			r := l.recoverTask(t, "requeue", l.ver, "")
			nodetest.Must(t, r, 200)
			if nodetest.Str(r.JSON(), "state") != "PENDING" {
				t.Fatalf("recover: %s", r.Body)
			}
		})
	}
}

// The recovered task detail, like every task detail, carries no secret.
func TestRecoverDetailNoSecret(t *testing.T) {
	l := driveTo(t, stRunning)
	l.n.Advance(l.n.Engine.Config().RunningLease)
	nodetest.Must(t, l.call(t, "complete", ""), 409, "lease_expired")
	r := l.recoverTask(t, "requeue", l.ver, "")
	nodetest.Must(t, r, 200)
	l.mustHoldNoSecret(t, r.Body)
	l.mustHoldNoSecret(t, l.n.Do("GET", "/api/v1/admin/tasks/"+l.id+"/events", l.n.AdminToken, nil, nil).Body)
	if bytes.Contains(r.Body, []byte(l.n.Dir)) {
		t.Fatal("detail names the data directory")
	}
}
