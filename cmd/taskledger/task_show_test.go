package main

import (
	"strings"
	"testing"

	"taskledger/node/nodetest"
)

// `task show` prints what its help promises, in human form: the claim,
// the execution (with its step), the result and the failure reason.
func TestTaskShowPrintsClaimExecutionResultAndFailure(t *testing.T) {
	o := newOpCLI(t)
	d := o.n.RegisterDevice()
	nodetest.Must(t, d.Ready(), 200)
	wants := func(out string, parts ...string) {
		t.Helper()
		for _, p := range parts {
			if !strings.Contains(out, p) {
				t.Errorf("task show lacks %q:\n%s", p, out)
			}
		}
	}
	// run claims the task just created, starts it and heartbeats with a
	// step; it returns the claim token, generation and execution id.
	run := func(id string) (string, uint64, string) {
		cr, tok := d.Claim()
		nodetest.Must(t, cr, 200)
		gen := nodetest.Num(cr.JSON(), "claim_generation")
		wants(o.ok("task", "show", id), "claim:", "device "+d.ID+", generation 1", "execution:      none", "result:         none", "failure:        none")
		sr := d.Call(id, "start", tok, map[string]any{"claim_generation": gen, "expected_version": nodetest.Num(cr.JSON(), "version")}, "")
		nodetest.Must(t, sr, 200)
		ex := nodetest.Str(sr.JSON(), "execution_id")
		nodetest.Must(t, d.Call(id, "heartbeat", tok, map[string]any{"claim_generation": gen, "execution_id": ex, "step": "shoot"}, ""), 200)
		wants(o.ok("task", "show", id), "state:          RUNNING", "execution:      "+ex+", started ", "step shoot")
		return tok, gen, ex
	}

	ok := strings.TrimSpace(o.ok("task", "create", "--payload", `{"job":"photo"}`, "--authorize", "--ttl", "1h"))
	wants(o.ok("task", "show", ok), "task:           "+ok, "state:          PENDING", `payload:        {"job":"photo"}`,
		"authorization:  ACTIVE until ", "claim:          none")
	tok, gen, ex := run(ok)
	nodetest.Must(t, d.Call(ok, "complete", tok, map[string]any{"claim_generation": gen, "execution_id": ex,
		"expected_version": nodetest.Num(o.n.Task(ok), "version"), "result": map[string]any{"frames": 3}}, ""), 200)
	wants(o.ok("task", "show", ok), "state:          SUCCEEDED", `result:         {"frames":3}`, "failure:        none")

	bad := strings.TrimSpace(o.ok("task", "create", "--payload", `{"job":"scan"}`, "--authorize", "--ttl", "1h"))
	tok, gen, ex = run(bad)
	nodetest.Must(t, d.Call(bad, "fail", tok, map[string]any{"claim_generation": gen, "execution_id": ex,
		"expected_version": nodetest.Num(o.n.Task(bad), "version"), "reason_code": "exit_7", "detail": "the job exited 7"}, ""), 200)
	wants(o.ok("task", "show", bad), "state:          FAILED", "failure:        exit_7: the job exited 7", "result:         none")
}
