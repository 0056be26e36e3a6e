package api_test

import (
	"testing"
	"time"

	"taskledger/commands"
	"taskledger/node/nodetest"
)

// serve --default-takeover manual: an authorization that names no
// takeover (authorize, or create with authorize) is decided "manual" and
// recorded so in its event; one that names "reclaim" stays reclaim. The
// decided policy outlives a restart under another default: replay reads
// the event, never the flag.
func TestDefaultTakeoverIsDecidedAndRecorded(t *testing.T) {
	manual := nodetest.WithConfig(func(c *commands.Config) { c.DefaultTakeover = "manual" })
	n := nodetest.Start(t, manual)
	created := nodetest.Str(n.CreateTaskFor(t, map[string]any{"n": 1}, time.Hour), "id")
	omitted := newTakeoverTask(t, n, "")
	named := newTakeoverTask(t, n, "reclaim")
	policy := func(n *nodetest.Node, id string) any {
		return n.Task(id)["authorization"].(map[string]any)["takeover"]
	}
	for id, want := range map[string]string{created: "manual", omitted: "manual", named: "reclaim"} {
		if got := policy(n, id); got != want {
			t.Fatalf("takeover %v, want %s", got, want)
		}
	}
	for _, e := range n.Events(t, omitted) {
		if nodetest.Str(e, "type") == "task.authorized" && nodetest.Obj(e, "body")["takeover"] != "manual" {
			t.Fatalf("the event does not record the decided policy: %v", e)
		}
	}

	// The holder of a task authorized under the default sees it as manual:
	// at the claim lease expiry it needs an operator.
	d := n.ReadyDevice(t)
	if id, _, _ := d.MustClaim(t); id != created {
		t.Fatalf("claimed %s, want %s", id, created)
	}
	n.Advance(10 * time.Minute)
	if !needsOperator(t, n, created) {
		t.Fatalf("a claim under the manual default does not need an operator: %v", n.Task(created))
	}

	r := n.Restart(nodetest.WithConfig(func(c *commands.Config) { c.DefaultTakeover = "reclaim" }))
	defer r.Close()
	for id, want := range map[string]string{created: "manual", omitted: "manual", named: "reclaim"} {
		if got := policy(r, id); got != want {
			t.Fatalf("after a restart under reclaim: takeover %v, want %s", got, want)
		}
	}
	fresh := newTakeoverTask(t, r, "")
	if got := policy(r, fresh); got != "reclaim" {
		t.Fatalf("under the reclaim default: %v", got)
	}
}
