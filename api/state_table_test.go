package api_test

import (
	"bytes"
	"testing"

	"taskledger/node/nodetest"
)

// i4Want is the expected answer of one (state × command) cell.
type i4Want struct {
	status  int
	code    string // error code, "" on success
	state   string // the task's state afterwards
	appends int    // events appended; -1: not asserted
}

func i4Ok(state string) i4Want         { return i4Want{status: 200, state: state, appends: 1} }
func i4Created(state string) i4Want    { return i4Want{status: 201, state: state, appends: 1} }
func i4Refused(s int, c string) i4Want { return i4Want{status: s, code: c, appends: 0} }

var (
	i4NotHeld      = i4Refused(404, "claim_not_found")
	i4BadState     = i4Refused(409, "invalid_state")
	i4LeaseExpired = i4Refused(409, "lease_expired")
	i4NotRequested = i4Refused(409, "cancel_not_requested")
	i4LeaseLive    = i4Refused(409, "lease_not_expired")
)

var i4DeviceOps = []string{"renew", "release", "start", "heartbeat", "await-confirmation", "resume", "complete",
	"fail", "cancel-ack", "evidence"}

var i4AdminOps = []string{"amend", "authorize", "authorization/revoke", "reference-image", "cancel", "recover"}

// i4Row fills every op of ops with w, then applies the exceptions.
func i4Row(ops []string, w i4Want, except map[string]i4Want) map[string]i4Want {
	m := map[string]i4Want{}
	for _, op := range ops {
		m[op] = w
	}
	for op, e := range except {
		m[op] = e
	}
	return m
}

// i4DeviceTable is domain.md's state machine for the device commands, with
// the refusals in api.md's decision order: claim_not_found (the device
// does not hold the task: never claimed or ended) before lease_expired
// before invalid_state before execution/version checks before
// cancel_not_requested.
func i4DeviceTable() map[string]map[string]i4Want {
	late := i4Want{status: 409, code: "lease_expired", state: "RUNNING", appends: 1} // kept as task.late_report
	running := func(st string, cancel bool) map[string]i4Want {
		m := i4Row(i4DeviceOps, i4BadState, map[string]i4Want{
			"heartbeat": i4Ok(st), "complete": i4Ok("SUCCEEDED"), "fail": i4Ok("FAILED"),
			"cancel-ack": i4NotRequested, "evidence": i4Created(st)})
		if st == "RUNNING" {
			m["await-confirmation"] = i4Ok("WAITING_CONFIRMATION")
		} else {
			m["resume"] = i4Ok("RUNNING")
		}
		if cancel {
			m["cancel-ack"] = i4Ok("CANCELED")
		}
		return m
	}
	return map[string]map[string]i4Want{
		i4StPending: i4Row(i4DeviceOps, i4NotHeld, nil),
		i4StClaimed: i4Row(i4DeviceOps, i4BadState, map[string]i4Want{
			"renew": i4Ok("CLAIMED"), "release": i4Ok("PENDING"), "start": i4Ok("RUNNING")}),
		i4StClaimedStale:  i4Row(i4DeviceOps, i4LeaseExpired, nil),
		i4StRunning:       running("RUNNING", false),
		i4StRunningCancel: running("RUNNING", true),
		i4StRunningStale:  i4Row(i4DeviceOps, i4LeaseExpired, map[string]i4Want{"complete": late, "fail": late}),
		i4StWaiting:       running("WAITING_CONFIRMATION", false),
		i4StWaitingCancel: running("WAITING_CONFIRMATION", true),
		i4StSucceeded:     i4Row(i4DeviceOps, i4NotHeld, nil),
		i4StFailed:        i4Row(i4DeviceOps, i4NotHeld, nil),
		i4StCanceled:      i4Row(i4DeviceOps, i4NotHeld, nil),
	}
}

// i4AdminTable is domain.md's state machine for the operator commands.
func i4AdminTable() map[string]map[string]i4Want {
	executing := func(st string, cancelAgain bool) map[string]i4Want {
		m := i4Row(i4AdminOps, i4BadState, map[string]i4Want{"cancel": i4Ok(st), "recover": i4LeaseLive})
		if cancelAgain {
			m["cancel"] = i4Want{status: 200, state: st, appends: -1}
		}
		return m
	}
	stale := executing("RUNNING", false)
	stale["recover"] = i4Ok("FAILED")
	return map[string]map[string]i4Want{
		i4StPending:       i4Row(i4AdminOps, i4Ok("PENDING"), map[string]i4Want{"cancel": i4Ok("CANCELED"), "recover": i4BadState}),
		i4StClaimed:       i4Row(i4AdminOps, i4BadState, map[string]i4Want{"cancel": i4Ok("CANCELED"), "recover": i4LeaseLive}),
		i4StClaimedStale:  i4Row(i4AdminOps, i4Ok("PENDING"), map[string]i4Want{"cancel": i4Ok("CANCELED"), "recover": i4BadState}),
		i4StRunning:       executing("RUNNING", false),
		i4StRunningCancel: executing("RUNNING", true),
		i4StRunningStale:  stale,
		i4StWaiting:       executing("WAITING_CONFIRMATION", false),
		i4StWaitingCancel: executing("WAITING_CONFIRMATION", true),
		i4StSucceeded:     i4Row(i4AdminOps, i4BadState, nil),
		i4StFailed:        i4Row(i4AdminOps, i4BadState, nil),
		i4StCanceled:      i4Row(i4AdminOps, i4BadState, nil),
	}
}

func (l *i4Life) adminCall(t *testing.T, op string) *nodetest.Resp {
	t.Helper()
	switch op {
	case "amend":
		return l.admin(t, op, map[string]any{"expected_revision": l.rev, "payload": map[string]any{"n": 2}})
	case "authorize":
		return l.admin(t, op, map[string]any{"expected_revision": l.rev, "ttl_seconds": 3600})
	case "authorization/revoke", "cancel":
		return l.admin(t, op, map[string]any{"reason": "operator decision"})
	case "reference-image":
		return i4PutImage(l.n, l.id, i4TinyJPEG(t, 7), "")
	case "recover":
		return l.admin(t, op, map[string]any{"decision": "fail", "reason": "device silent", "expected_version": l.ver})
	}
	t.Fatalf("unknown op %s", op)
	return nil
}

func i4RawTask(t *testing.T, l *i4Life) []byte {
	t.Helper()
	r := l.n.Do("GET", "/api/v1/admin/tasks/"+l.id, l.n.AdminToken, nil, nil)
	nodetest.Must(t, r, 200)
	return r.Body
}

// i4CheckCell sends one command to a task in a driven state and checks the
// answer, the appended events and the task's state and version.
func i4CheckCell(t *testing.T, l *i4Life, w i4Want, send func() *nodetest.Resp) {
	t.Helper()
	before := l.n.Task(l.id)
	beforeRaw := i4RawTask(t, l)
	head := l.n.Head()
	r := send()
	if r.Status != w.status || r.Code() != w.code {
		t.Fatalf("want %d %q, got %d %s", w.status, w.code, r.Status, r.Body)
	}
	if w.appends >= 0 && l.n.Head() != head+uint64(w.appends) {
		t.Fatalf("appended %d events, want %d", l.n.Head()-head, w.appends)
	}
	if w.code != "" && w.appends == 0 {
		if after := i4RawTask(t, l); !bytes.Equal(after, beforeRaw) {
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
	table := i4DeviceTable()
	for _, st := range i4DrivenStates {
		for _, op := range i4DeviceOps {
			w, okCell := table[st][op]
			if !okCell {
				t.Fatalf("no expectation for %s × %s", st, op)
			}
			t.Run(st+"/"+op, func(t *testing.T) {
				l := i4DriveTo(t, st)
				i4CheckCell(t, l, w, func() *nodetest.Resp { return l.call(t, op, "") })
			})
		}
	}
}

func TestStateTableOperator(t *testing.T) {
	table := i4AdminTable()
	for _, st := range i4DrivenStates {
		for _, op := range i4AdminOps {
			w, okCell := table[st][op]
			if !okCell {
				t.Fatalf("no expectation for %s × %s", st, op)
			}
			t.Run(st+"/"+op, func(t *testing.T) {
				l := i4DriveTo(t, st)
				i4CheckCell(t, l, w, func() *nodetest.Resp { return l.adminCall(t, op) })
			})
		}
	}
}
