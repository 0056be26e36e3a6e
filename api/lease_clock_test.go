package api_test

// Leases are judged on ledger time, which advances with the elapsed-time
// clock: a step of the wall clock while the node runs neither cuts a lease
// (every device would lose its work at once) nor stretches it (a dead
// device's task would wait for the wall clock to catch up).

import (
	"testing"
	"time"

	"taskledger/commands"
	"taskledger/node/nodetest"
)

func steadyNode(t *testing.T) (*nodetest.Node, *nodetest.StepTime) {
	src := nodetest.NewStepTime(time.Now().Round(0)) //tl:wallclock a realistic start for a test clock
	return nodetest.Start(t, nodetest.WithClock(commands.NewSteadyClock(src, time.Time{}))), src
}

func TestRunningLeaseOutlivesAWallClockStepForward(t *testing.T) {
	n, src := steadyNode(t)
	d := n.ReadyDevice(t)
	id := n.CreateTask(nil)
	_, tok, _ := d.MustClaim(t)
	exec := d.MustStart(t, id, tok, 1, 2)
	recover := map[string]any{"decision": "fail", "reason": "silent", "expected_version": 3}

	src.Step(2 * time.Hour)
	src.Pass(8 * time.Second)
	// 8 s into a 90 s running lease: the heartbeat holds, the operator may
	// not recover yet.
	hb := d.Call(id, "heartbeat", tok, map[string]any{"claim_generation": 1, "execution_id": exec, "step": "on time"}, "")
	nodetest.Must(t, hb, 200)
	nodetest.Must(t, n.Admin("POST", "/tasks/"+id+"/recover", recover), 409, "lease_not_expired")

	// The lease still ends: 91 s after that heartbeat (90 s, less the 1%
	// ledger time moves toward the stepped wall clock), it is over.
	src.Pass(91 * time.Second)
	nodetest.Must(t, d.Call(id, "heartbeat", tok, map[string]any{"claim_generation": 1, "execution_id": exec, "step": "late"}, ""),
		409, "lease_expired")
	_, recover["expected_version"] = n.State(id)
	nodetest.Must(t, n.Admin("POST", "/tasks/"+id+"/recover", recover), 200)
}

func TestClaimLeaseEndsAfterAWallClockStepBack(t *testing.T) {
	n, src := steadyNode(t)
	d := n.ReadyDevice(t)
	id := n.CreateTask(nil)
	_, _, claim := d.MustClaim(t)
	if nodetest.Str(nodetest.Obj(claim.JSON(), "task"), "id") != id {
		t.Fatalf("claimed %v", claim.JSON())
	}

	src.Step(-time.Hour)
	// Ten minutes of real time (the claim lease) and a little more for the
	// 1% ledger time moves toward the wall clock: the claim is over, and
	// another device takes the task at generation 2. On the wall clock
	// alone the lease would last another hour.
	src.Pass(10*time.Minute + 7*time.Second)
	other := n.ReadyDevice(t)
	got, _, r := other.MustClaim(t)
	if got != id || nodetest.Num(r.JSON(), "claim_generation") != 2 {
		t.Fatalf("after the claim lease, with the wall clock stepped back an hour: claimed %q at generation %v", got,
			r.JSON()["claim_generation"])
	}
}
