package api_test

import (
	"bytes"
	"testing"

	"taskledger/node/nodetest"
)

// cellWant is the expected answer of one (state × command) cell.
type cellWant struct {
	status  int
	code    string // error code, "" on success
	state   string // the task's state afterwards
	appends int    // events appended; -1: not asserted
}

func wantOK(state string) cellWant         { return cellWant{status: 200, state: state, appends: 1} }
func wantCreated(state string) cellWant    { return cellWant{status: 201, state: state, appends: 1} }
func wantRefused(s int, c string) cellWant { return cellWant{status: s, code: c, appends: 0} }

var (
	refusedNotHeld      = wantRefused(404, "claim_not_found")
	refusedBadState     = wantRefused(409, "invalid_state")
	refusedLeaseExpired = wantRefused(409, "lease_expired")
	refusedNotRequested = wantRefused(409, "cancel_not_requested")
	refusedLeaseLive    = wantRefused(409, "lease_not_expired")
)

var deviceOps = []string{"renew", "release", "start", "heartbeat", "await-confirmation", "resume", "complete",
	"fail", "cancel-ack", "evidence"}

var adminOps = []string{"amend", "authorize", "authorization/revoke", "reference-image", "cancel", "recover"}

// tableRow fills every op of ops with w, then applies the exceptions.
func tableRow(ops []string, w cellWant, except map[string]cellWant) map[string]cellWant {
	m := map[string]cellWant{}
	for _, op := range ops {
		m[op] = w
	}
	for op, e := range except {
		m[op] = e
	}
	return m
}

// deviceStateTable is domain.md's state machine for the device commands, with
// the refusals in api.md's decision order: claim_not_found (the device
// does not hold the task: never claimed or ended) before lease_expired
// before invalid_state before execution/version checks before
// cancel_not_requested.
func deviceStateTable() map[string]map[string]cellWant {
	late := cellWant{status: 409, code: "lease_expired", state: "RUNNING", appends: 1} // kept as task.late_report
	running := func(st string, cancel bool) map[string]cellWant {
		m := tableRow(deviceOps, refusedBadState, map[string]cellWant{
			"heartbeat": wantOK(st), "complete": wantOK("SUCCEEDED"), "fail": wantOK("FAILED"),
			"cancel-ack": refusedNotRequested, "evidence": wantCreated(st)})
		if st == "RUNNING" {
			m["await-confirmation"] = wantOK("WAITING_CONFIRMATION")
		} else {
			m["resume"] = wantOK("RUNNING")
		}
		if cancel {
			m["cancel-ack"] = wantOK("CANCELED")
		}
		return m
	}
	return map[string]map[string]cellWant{
		stPending: tableRow(deviceOps, refusedNotHeld, nil),
		stClaimed: tableRow(deviceOps, refusedBadState, map[string]cellWant{
			"renew": wantOK("CLAIMED"), "release": wantOK("PENDING"), "start": wantOK("RUNNING")}),
		stClaimedStale:  tableRow(deviceOps, refusedLeaseExpired, nil),
		stRunning:       running("RUNNING", false),
		stRunningCancel: running("RUNNING", true),
		stRunningStale:  tableRow(deviceOps, refusedLeaseExpired, map[string]cellWant{"complete": late, "fail": late}),
		stWaiting:       running("WAITING_CONFIRMATION", false),
		stWaitingCancel: running("WAITING_CONFIRMATION", true),
		stSucceeded:     tableRow(deviceOps, refusedNotHeld, nil),
		stFailed:        tableRow(deviceOps, refusedNotHeld, nil),
		stCanceled:      tableRow(deviceOps, refusedNotHeld, nil),
	}
}

// adminStateTable is domain.md's state machine for the operator commands.
func adminStateTable() map[string]map[string]cellWant {
	executing := func(st string, cancelAgain bool) map[string]cellWant {
		m := tableRow(adminOps, refusedBadState, map[string]cellWant{"cancel": wantOK(st), "recover": refusedLeaseLive})
		if cancelAgain {
			m["cancel"] = cellWant{status: 200, state: st, appends: -1}
		}
		return m
	}
	stale := executing("RUNNING", false)
	stale["recover"] = wantOK("FAILED")
	return map[string]map[string]cellWant{
		stPending:       tableRow(adminOps, wantOK("PENDING"), map[string]cellWant{"cancel": wantOK("CANCELED"), "recover": refusedBadState}),
		stClaimed:       tableRow(adminOps, refusedBadState, map[string]cellWant{"cancel": wantOK("CANCELED"), "recover": refusedLeaseLive}),
		stClaimedStale:  tableRow(adminOps, wantOK("PENDING"), map[string]cellWant{"cancel": wantOK("CANCELED"), "recover": refusedBadState}),
		stRunning:       executing("RUNNING", false),
		stRunningCancel: executing("RUNNING", true),
		stRunningStale:  stale,
		stWaiting:       executing("WAITING_CONFIRMATION", false),
		stWaitingCancel: executing("WAITING_CONFIRMATION", true),
		stSucceeded:     tableRow(adminOps, refusedBadState, nil),
		stFailed:        tableRow(adminOps, refusedBadState, nil),
		stCanceled:      tableRow(adminOps, refusedBadState, nil),
	}
}

func (l *taskLife) adminCall(t *testing.T, op string) *nodetest.Resp {
	t.Helper()
	switch op {
	case "amend":
		return l.admin(t, op, map[string]any{"expected_revision": l.rev, "payload": map[string]any{"n": 2}})
	case "authorize":
		return l.admin(t, op, map[string]any{"expected_revision": l.rev, "ttl_seconds": 3600})
	case "authorization/revoke", "cancel":
		return l.admin(t, op, map[string]any{"reason": "operator decision"})
	case "reference-image":
		return putReferenceImage(l.n, l.id, tinyJPEG(t, 7), "")
	case "recover":
		return l.admin(t, op, map[string]any{"decision": "fail", "reason": "device silent", "expected_version": l.ver})
	}
	t.Fatalf("unknown op %s", op)
	return nil
}

func rawTaskDoc(t *testing.T, l *taskLife) []byte {
	t.Helper()
	r := l.n.Do("GET", "/api/v1/admin/tasks/"+l.id, l.n.AdminToken, nil, nil)
	nodetest.Must(t, r, 200)
	return r.Body
}

// checkCell sends one command to a task in a driven state and checks the
// answer, the appended events and the task's state and version.
func checkCell(t *testing.T, l *taskLife, w cellWant, send func() *nodetest.Resp) {
	t.Helper()
	before := l.n.Task(l.id)
	beforeRaw := rawTaskDoc(t, l)
	head := l.n.Head()
	r := send()
	if r.Status != w.status || r.Code() != w.code {
		t.Fatalf("want %d %q, got %d %s", w.status, w.code, r.Status, r.Body)
	}
	if w.appends >= 0 && l.n.Head() != head+uint64(w.appends) {
		t.Fatalf("appended %d events, want %d", l.n.Head()-head, w.appends)
	}
	if w.code != "" && w.appends == 0 {
		if after := rawTaskDoc(t, l); !bytes.Equal(after, beforeRaw) {
			t.Fatalf("refused command changed the task:\n%s\n%s", beforeRaw, after)
		}
		return
	}
	after := l.n.Task(l.id)
	if st := nodetest.Str(after, "state"); st != w.state {
		t.Fatalf("state %s, want %s", st, w.state)
	}
	dv := nodetest.Num(after, "version") - nodetest.Num(before, "version")
	changed := nodetest.Str(before, "state") != nodetest.Str(after, "state")
	if (changed && dv != 1) || (!changed && dv != 0) {
		t.Fatalf("version moved by %d while the state went %s → %s", dv, nodetest.Str(before, "state"), w.state)
	}
	if w.status == 200 && r.JSON()["state"] != nil && nodetest.Str(r.JSON(), "state") != w.state {
		t.Fatalf("answer state %s, want %s", nodetest.Str(r.JSON(), "state"), w.state)
	}
}

func TestStateTableDevice(t *testing.T) {
	table := deviceStateTable()
	for _, st := range drivenStates {
		for _, op := range deviceOps {
			w, okCell := table[st][op]
			if !okCell {
				t.Fatalf("no expectation for %s × %s", st, op)
			}
			t.Run(st+"/"+op, func(t *testing.T) {
				l := driveTo(t, st)
				checkCell(t, l, w, func() *nodetest.Resp { return l.call(t, op, "") })
			})
		}
	}
}

func TestStateTableOperator(t *testing.T) {
	table := adminStateTable()
	for _, st := range drivenStates {
		for _, op := range adminOps {
			w, okCell := table[st][op]
			if !okCell {
				t.Fatalf("no expectation for %s × %s", st, op)
			}
			t.Run(st+"/"+op, func(t *testing.T) {
				l := driveTo(t, st)
				checkCell(t, l, w, func() *nodetest.Resp { return l.adminCall(t, op) })
			})
		}
	}
}
