package nodetest

import "testing"

func TestLifecycleSmoke(t *testing.T) {
	n := Start(t)
	d := n.RegisterDevice()
	Must(t, d.Ready(), 200)
	id := n.CreateTask(map[string]any{"x": 1})
	r, tok := d.Claim()
	Must(t, r, 200)
	if got := Str(r.JSON()["task"].(map[string]any), "id"); got != id {
		t.Fatalf("claimed %s, want %s", got, id)
	}
	s := d.Call(id, "start", tok, map[string]any{"claim_generation": 1, "expected_version": 2}, "")
	Must(t, s, 200)
	ex := Str(s.JSON(), "execution_id")
	c := d.Call(id, "complete", tok, map[string]any{"claim_generation": 1, "execution_id": ex, "expected_version": 3,
		"result": map[string]any{"ok": true}}, "")
	Must(t, c, 200)
	if st := Str(n.Task(id), "state"); st != "SUCCEEDED" {
		t.Fatalf("state %s", st)
	}
}
