package api_test

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"taskledger/node/nodetest"
)

// mustRefuse sends a call that must be refused with status/code and append nothing.
func (l *taskLife) mustRefuse(t *testing.T, status int, code string, send func() *nodetest.Resp) {
	t.Helper()
	head := l.n.Head()
	r := send()
	nodetest.Must(t, r, status, code)
	if l.n.Head() != head {
		t.Fatalf("refused call appended %d events", l.n.Head()-head)
	}
}

func TestCompleteRecordsResult(t *testing.T) {
	l := driveTo(t, stRunning)
	body := func(result any) map[string]any {
		b := l.body("complete")
		b["result"] = result
		return b
	}
	// The result is an object of at most 2 KiB in its canonical encoding.
	big := map[string]any{"s": strings.Repeat("x", 2041)} // {"s":"…"} = 2049 bytes
	l.mustRefuse(t, 400, "invalid_request", func() *nodetest.Resp { return l.d.Call(l.id, "complete", l.tok, body(big), "") })
	for _, bad := range []any{[]any{1}, "done", 3, nil} {
		l.mustRefuse(t, 400, "invalid_request", func() *nodetest.Resp { return l.d.Call(l.id, "complete", l.tok, body(bad), "") })
	}
	// execution and version preconditions
	l.mustRefuse(t, 409, "version_mismatch", func() *nodetest.Resp {
		b := body(map[string]any{})
		b["expected_version"] = l.ver + 1
		return l.d.Call(l.id, "complete", l.tok, b, "")
	})

	l.mustRefuse(t, 409, "execution_mismatch", func() *nodetest.Resp {
		b := body(map[string]any{})
		b["execution_id"] = nodetest.NewKey()
		return l.d.Call(l.id, "complete", l.tok, b, "")
	})

	exact := map[string]any{"s": strings.Repeat("y", 2040)} // exactly 2048 bytes
	key := nodetest.NewKey()
	r := l.d.Call(l.id, "complete", l.tok, body(exact), key)
	nodetest.Must(t, r, 200)
	m := r.JSON()
	for _, f := range []string{"task_id", "state", "version", "claim_generation", "execution_id", "server_time",
		"lease_expires_at", "cancel_requested"} {
		if _, ok := m[f]; !ok {
			t.Fatalf("complete answer lacks %s: %s", f, r.Body)
		}
	}
	if nodetest.Str(m, "state") != "SUCCEEDED" || nodetest.Num(m, "version") != l.ver+1 || nodetest.Str(m, "execution_id") != l.exec {
		t.Fatalf("complete answer %s", r.Body)
	}
	task := l.n.Task(l.id)
	if nodetest.Str(task, "state") != "SUCCEEDED" {
		t.Fatalf("state %v", task["state"])
	}
	res, _ := task["result"].(map[string]any)
	if nodetest.Str(res, "s") != exact["s"] || task["failure"] != nil {
		t.Fatalf("task detail result %v failure %v", task["result"], task["failure"])
	}
	// The replay answers the recorded 200 even though the execution ended.
	head := l.n.Head()
	again := l.d.Call(l.id, "complete", l.tok, body(exact), key)
	nodetest.Must(t, again, 200)
	if again.Header.Get("Idempotent-Replayed") != "true" || !bytes.Equal(again.Body, r.Body) || l.n.Head() != head {
		t.Fatalf("replay: %v %s", again.Header, again.Body)
	}
}

func TestFailRecordsReason(t *testing.T) {
	l := driveTo(t, stWaiting)
	body := func(code, detail string) map[string]any {
		b := l.body("fail")
		b["reason_code"], b["detail"] = code, detail
		return b
	}
	for _, c := range []string{"", "Bad", "a-b", "a b", "é", strings.Repeat("a", 65)} {
		l.mustRefuse(t, 400, "invalid_request", func() *nodetest.Resp { return l.d.Call(l.id, "fail", l.tok, body(c, "d"), "") })
	}
	l.mustRefuse(t, 400, "invalid_request", func() *nodetest.Resp {
		return l.d.Call(l.id, "fail", l.tok, body("ok", strings.Repeat("d", 257)), "")
	})

	code, detail := strings.Repeat("z", 60)+"_0_9", strings.Repeat("d", 256)
	r := l.d.Call(l.id, "fail", l.tok, body(code, detail), "")
	nodetest.Must(t, r, 200)
	if nodetest.Str(r.JSON(), "state") != "FAILED" {
		t.Fatalf("fail answer %s", r.Body)
	}
	task := l.n.Task(l.id)
	f, _ := task["failure"].(map[string]any)
	if nodetest.Str(task, "state") != "FAILED" || nodetest.Str(f, "reason_code") != code || nodetest.Str(f, "detail") != detail ||
		task["result"] != nil {
		t.Fatalf("task detail %v", task)
	}
}

func TestConfirmationWait(t *testing.T) {
	l := driveTo(t, stRunning)
	l.mustRefuse(t, 400, "invalid_request", func() *nodetest.Resp {
		b := l.body("await-confirmation")
		b["reason"] = strings.Repeat("r", 257)
		return l.d.Call(l.id, "await-confirmation", l.tok, b, "")
	})

	l.mustRefuse(t, 409, "version_mismatch", func() *nodetest.Resp {
		b := l.body("await-confirmation")
		b["expected_version"] = l.ver - 1
		return l.d.Call(l.id, "await-confirmation", l.tok, b, "")
	})

	v := l.ver
	l.must(t, "await-confirmation")
	task := l.n.Task(l.id)
	if nodetest.Str(task, "state") != "WAITING_CONFIRMATION" || l.ver != v+1 || nodetest.Num(task, "version") != v+1 {
		t.Fatalf("after await-confirmation: %v", task)
	}
	// The running lease still runs while waiting: a heartbeat extends it,
	// and nothing changes the version.
	l.n.Advance(60 * time.Second)
	l.must(t, "heartbeat")
	if l.ver != v+1 {
		t.Fatalf("heartbeat moved the version to %d", l.ver)
	}
	l.must(t, "resume")
	if nodetest.Str(l.n.Task(l.id), "state") != "RUNNING" || l.ver != v+2 {
		t.Fatalf("after resume: version %d", l.ver)
	}
	l.must(t, "await-confirmation")
	l.must(t, "complete")
	if nodetest.Str(l.n.Task(l.id), "state") != "SUCCEEDED" {
		t.Fatal("complete from WAITING_CONFIRMATION did not succeed")
	}
}

func TestLateReport(t *testing.T) {
	l := driveTo(t, stRunning)
	l.n.Advance(l.n.Engine.Config().RunningLease) // now == running lease end: expired
	// Steps before the lease check still answer first.
	l.mustRefuse(t, 409, "claim_generation_mismatch", func() *nodetest.Resp {
		b := l.body("complete")
		b["claim_generation"] = l.gen + 1
		return l.d.Call(l.id, "complete", l.tok, b, "")
	})

	l.mustRefuse(t, 403, "claim_token_mismatch", func() *nodetest.Resp {
		return l.d.Call(l.id, "complete", nodetest.NewClaimToken(), l.body("complete"), "")
	})

	// Another execution's report is not kept.
	l.mustRefuse(t, 409, "lease_expired", func() *nodetest.Resp {
		b := l.body("complete")
		b["execution_id"] = nodetest.NewKey()
		return l.d.Call(l.id, "complete", l.tok, b, "")
	})

	l.mustRefuse(t, 409, "lease_expired", func() *nodetest.Resp { return l.d.Call(l.id, "heartbeat", l.tok, l.body("heartbeat"), "") })

	key := nodetest.NewKey()
	head := l.n.Head()
	r := l.d.Call(l.id, "complete", l.tok, l.body("complete"), key)
	nodetest.Must(t, r, 409, "lease_expired")
	if l.n.Head() != head+1 {
		t.Fatalf("late report appended %d events", l.n.Head()-head)
	}
	again := l.d.Call(l.id, "complete", l.tok, l.body("complete"), key)
	nodetest.Must(t, again, 409, "lease_expired")
	if l.n.Head() != head+1 || again.Header.Get("Idempotent-Replayed") != "true" {
		t.Fatalf("late report replay appended or was not marked: head %d, %v", l.n.Head(), again.Header)
	}
	// Same key, other body → conflict.
	other := l.body("complete")
	other["result"] = map[string]any{"ok": false}
	l.mustRefuse(t, 409, "idempotency_conflict", func() *nodetest.Resp { return l.d.Call(l.id, "complete", l.tok, other, key) })
	// A late fail under another key is kept too.
	nodetest.Must(t, l.d.Call(l.id, "fail", l.tok, l.body("fail"), ""), 409, "lease_expired")

	task := l.n.Task(l.id)
	if nodetest.Str(task, "state") != "RUNNING" || nodetest.Num(task, "version") != l.ver || task["result"] != nil {
		t.Fatalf("a late report changed the task: %v", task)
	}
	lates, _ := task["late_reports"].([]any)
	if len(lates) != 2 {
		t.Fatalf("late_reports %v", task["late_reports"])
	}
	c, f := lates[0].(map[string]any), lates[1].(map[string]any)
	if nodetest.Str(c, "outcome") != "complete" || nodetest.Str(c, "execution_id") != l.exec || nodetest.Str(c, "device_id") != l.d.ID ||
		c["result"].(map[string]any)["ok"] != true {
		t.Fatalf("late complete %v", c)
	}
	if nodetest.Str(f, "outcome") != "fail" || nodetest.Str(f, "reason_code") != "target_crashed" {
		t.Fatalf("late fail %v", f)
	}
	// The operator sees them at recovery; afterwards the device holds
	// nothing, and the recorded late report still replays the same 409.
	rec := l.admin(t, "recover", map[string]any{"decision": "fail", "reason": "device silent", "expected_version": l.ver})
	nodetest.Must(t, rec, 200)
	if n := len(rec.JSON()["late_reports"].([]any)); n != 2 {
		t.Fatalf("recovery answer shows %d late reports", n)
	}
	head = l.n.Head()
	nodetest.Must(t, l.d.Call(l.id, "complete", l.tok, l.body("complete"), key), 409, "lease_expired")
	if l.n.Head() != head {
		t.Fatal("replay after recovery appended")
	}
	l.mustRefuse(t, 404, "claim_not_found", func() *nodetest.Resp { return l.d.Call(l.id, "complete", l.tok, l.body("complete"), "") })
	raw, _ := json.Marshal(l.n.Task(l.id))
	if !strings.Contains(string(raw), `"late_reports":[{`) {
		t.Fatalf("late reports missing after recovery: %s", raw)
	}
}
