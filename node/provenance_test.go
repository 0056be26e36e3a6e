package node_test

import (
	"encoding/json"
	"testing"

	"taskledger/api"
	"taskledger/node/nodetest"
)

func TestProvenanceNamesTheEventThatLastSetEachField(t *testing.T) {
	n := nodetest.Start(t)
	d := n.RegisterDevice()
	if r := d.Ready(); r.Status != 200 {
		t.Fatalf("presence: %d %s", r.Status, r.Body)
	}
	id := n.CreateTask(map[string]any{"kind": "demo"})
	if r, _ := d.Claim(); r.Status != 200 {
		t.Fatalf("claim: %d %s", r.Status, r.Body)
	}
	r := n.Do("GET", "/api/v1/admin/tasks/"+id+"/provenance", n.AdminToken, nil, nil)
	if r.Status != 200 {
		t.Fatalf("provenance: %d %s", r.Status, r.Body)
	}
	var doc struct {
		TaskID string                        `json:"task_id"`
		Fields map[string]api.ProvenanceJSON `json:"fields"`
	}
	if err := json.Unmarshal(r.Body, &doc); err != nil {
		t.Fatal(err)
	}
	detail := n.Task(id)
	for k := range detail {
		if _, ok := doc.Fields[k]; !ok {
			t.Errorf("field %q of the detail has no provenance", k)
		}
	}
	want := map[string]string{"id": "task.created", "payload": "task.created", "state": "task.claimed",
		"claim": "task.claimed", "claim.device_id": "task.claimed"}
	for f, typ := range want {
		if doc.Fields[f].Type != typ {
			t.Errorf("%s: last set by %+v, want %s", f, doc.Fields[f], typ)
		}
	}
	if g := doc.Fields["claim"].Generation; g == nil || *g != 1 {
		t.Errorf("claim generation: %v", g)
	}
	if doc.Fields["id"].Generation != nil || doc.Fields["id"].Actor.Kind != "operator" || doc.Fields["state"].Actor.Kind != "device" {
		t.Errorf("actors or generation: %+v %+v", doc.Fields["id"], doc.Fields["state"])
	}
	if r := n.Do("GET", "/api/v1/admin/tasks/00000000-0000-4000-8000-000000000000/provenance", n.AdminToken, nil, nil); r.Status != 404 || r.Code() != "task_not_found" {
		t.Fatalf("unknown task: %d %s", r.Status, r.Body)
	}
	if r := n.Do("GET", "/api/v1/admin/tasks/"+id+"/provenance", "", nil, nil); r.Status != 401 {
		t.Fatalf("no token: %d", r.Status)
	}
}
