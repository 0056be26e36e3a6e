package api_test

import (
	"bytes"
	"testing"

	"taskledger/commands"
	"taskledger/node/nodetest"
)

// The task detail shows result, failure, confirmation wait, evidence and
// recovery, and never a token (client- or server-issued) or a token hash,
// nor does any other operator read.
func TestTaskDetailShowsOutcomesNoSecret(t *testing.T) {
	secret := bytes.Repeat([]byte{0x5a}, 32)
	n := nodetest.Start(t, nodetest.WithConfig(func(c *commands.Config) { c.ClaimSecret = secret }))
	reads := func(l *taskLife) {
		t.Helper()
		for _, p := range []string{"/api/v1/admin/tasks/" + l.id, "/api/v1/admin/tasks", "/api/v1/admin/tasks/" + l.id + "/events",
			"/api/v1/admin/events?limit=1000", "/api/v1/admin/devices", "/api/v1/admin/devices/" + l.d.ID} {
			r := n.Do("GET", p, n.AdminToken, nil, nil)
			nodetest.Must(t, r, 200)
			l.mustHoldNoSecret(t, r.Body)
			noStoragePath(t, n, r.Body)
		}
	}

	// Task 1: server-issued token; evidence; confirmation wait; complete.
	a := newTaskLife(t, n)
	r := a.d.ClaimWith(nodetest.NewKey(), "")
	nodetest.Must(t, r, 200)
	a.tok = nodetest.Str(r.JSON()["claim"].(map[string]any), "token")
	a.gen, a.ver = nodetest.Num(r.JSON(), "claim_generation"), nodetest.Num(r.JSON(), "version")
	if len(a.tok) != 64 {
		t.Fatalf("server-issued token %q", a.tok)
	}
	reads(a)
	a.must(t, "start")
	ev := mustUploaded(t, a.evidence(t, "", tinyPNG(t), nil), tinyPNG(t))
	a.must(t, "await-confirmation")
	d := n.Task(a.id)
	list, _ := d["evidence"].([]any)
	if nodetest.Str(d, "state") != "WAITING_CONFIRMATION" || len(list) != 1 ||
		nodetest.Str(list[0].(map[string]any), "evidence_id") != nodetest.Str(ev, "evidence_id") {
		t.Fatalf("waiting detail %v", d)
	}
	if c, _ := d["claim"].(map[string]any); nodetest.Str(c, "token_origin") == "" || c["token"] != nil {
		t.Fatalf("claim in detail %v", c)
	}
	reads(a)
	a.must(t, "complete")
	d = n.Task(a.id)
	if res, _ := d["result"].(map[string]any); nodetest.Str(d, "state") != "SUCCEEDED" || res["ok"] != true || d["failure"] != nil {
		t.Fatalf("succeeded detail %v", d)
	}
	reads(a)

	// Task 2: client-issued token; fail.
	b := newTaskLife(t, n)
	b.claim(t)
	b.must(t, "start")
	b.must(t, "fail")
	d = n.Task(b.id)
	if f, _ := d["failure"].(map[string]any); nodetest.Str(d, "state") != "FAILED" || nodetest.Str(f, "reason_code") != "target_crashed" ||
		d["result"] != nil || d["recovery"] != nil {
		t.Fatalf("failed detail %v", d)
	}
	reads(b)

	// Task 3: recovered after a late report.
	c := newTaskLife(t, n)
	c.claim(t)
	c.must(t, "start")
	n.Advance(n.Engine.Config().RunningLease)
	nodetest.Must(t, c.call(t, "fail", ""), 409, "lease_expired")
	nodetest.Must(t, c.admin(t, "recover", map[string]any{"decision": "fail", "reason": "gone", "expected_version": c.ver}), 200)
	d = n.Task(c.id)
	rec, _ := d["recovery"].(map[string]any)
	if nodetest.Str(rec, "decision") != "fail" || nodetest.Str(rec, "reason") != "gone" || len(d["late_reports"].([]any)) != 1 {
		t.Fatalf("recovered detail %v", d)
	}
	reads(c)
}
