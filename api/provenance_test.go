package api_test

import (
	"encoding/json"
	"net/http"
	"reflect"
	"testing"
	"time"

	"taskledger/api"
	"taskledger/node/nodetest"
)

// TestProvenanceFromTheTasksStreamsEqualsAWholeReplay: the provenance of
// a task is folded from its own stream and its devices' streams, not from
// a replay of the whole log; for tasks that ended every way, one whose
// device was revoked while it held it (the detail reads the device), one
// reclaimed after its claim expired, and the other tasks' events
// interleaved, both give the same fields.
func TestProvenanceFromTheTasksStreamsEqualsAWholeReplay(t *testing.T) {
	n := nodetest.Start(t)
	devs := make([]*nodetest.Device, 6)
	for i := range devs {
		devs[i] = n.ReadyDevice(t)
	}
	done := n.StartTask(t, devs[0], map[string]any{"n": 0})
	nodetest.Must(t, done.Beat("halfway"), http.StatusOK)
	failed := n.StartTask(t, devs[1], map[string]any{"n": 1})
	nodetest.Must(t, done.Complete(map[string]any{"ok": true}), http.StatusOK)
	nodetest.Must(t, failed.Act("fail", map[string]any{"expected_version": 3, "reason_code": "exit_7", "detail": "exited 7"}), http.StatusOK)

	pending := n.CreateTask(map[string]any{"n": 2})
	nodetest.Must(t, n.Cancel(pending), http.StatusOK)
	canceled := n.StartTask(t, devs[2], map[string]any{"n": 3})
	nodetest.Must(t, n.Cancel(canceled.TaskID), http.StatusOK)
	_, version := n.State(canceled.TaskID)
	nodetest.Must(t, canceled.Act("cancel-ack", map[string]any{"expected_version": version}), http.StatusOK)

	// Revoked while it runs: the task needs an operator, who requeues it.
	orphan := n.StartTask(t, devs[3], map[string]any{"n": 4})
	nodetest.Must(t, n.Revoke(devs[3].ID), http.StatusOK)
	if d := n.Task(orphan.TaskID); d["needs_operator"] != true {
		t.Fatalf("after the revocation the task does not need an operator: %v", d)
	}
	// An event of the task while it needs the operator: the detail then
	// says so only if the device's revocation was folded.
	nodetest.Must(t, n.Cancel(orphan.TaskID), http.StatusOK)
	_, version = n.State(orphan.TaskID)
	nodetest.Must(t, n.Admin("POST", "/tasks/"+orphan.TaskID+"/recover",
		map[string]any{"decision": "fail", "reason": "device revoked", "expected_version": version}), http.StatusOK)

	// A claim that expires and is taken over by another device.
	lapsed := n.CreateTask(map[string]any{"n": 5})
	if got, _, _ := devs[4].MustClaim(t); got != lapsed {
		t.Fatalf("claimed %s, want %s", got, lapsed)
	}
	n.Advance(11 * time.Minute) // past the claim lease (10 min)
	for _, d := range devs[4:] {
		nodetest.Must(t, d.Ready(), http.StatusOK)
	}
	if got, _, _ := devs[5].MustClaim(t); got != lapsed {
		t.Fatalf("taken over: %s, want %s", got, lapsed)
	}
	open := n.CreateTask(map[string]any{"n": 6})

	for _, id := range []string{done.TaskID, failed.TaskID, pending, canceled.TaskID, orphan.TaskID, lapsed, open} {
		streams, whole, err := n.API.ProvenanceBothWays(id)
		if err != nil {
			t.Fatalf("%s: %v", id, err)
		}
		if len(streams) == 0 || !reflect.DeepEqual(streams, whole) {
			t.Errorf("%s: from its streams\n%v\nfrom the whole log\n%v", id, streams, whole)
		}
		r := n.Admin("GET", "/tasks/"+id+"/provenance", nil)
		var doc struct {
			Fields map[string]api.ProvenanceJSON `json:"fields"`
		}
		if err := json.Unmarshal(r.Body, &doc); err != nil || r.Status != http.StatusOK || !reflect.DeepEqual(doc.Fields, whole) {
			t.Errorf("%s: GET provenance answered %d %v, want the whole log's", id, r.Status, err)
		}
		if id == orphan.TaskID {
			if f := whole["needs_operator"]; f.Type != "task.recovered" {
				t.Errorf("needs_operator of the orphaned task last set by %+v, want task.recovered", f)
			}
		}
	}
}

// TestProvenanceReplaysTheWholeLogWhenTheTasksStreamsDoNotFold: should a
// task's own streams not fold alone (here every device stream reads as
// empty, so its claim names a device the fold never registered), the
// route answers from a replay of the whole log: the same fields, not an
// error.
func TestProvenanceReplaysTheWholeLogWhenTheTasksStreamsDoNotFold(t *testing.T) {
	n := nodetest.Start(t)
	run := n.StartTask(t, n.ReadyDevice(t), map[string]any{"n": 0})
	nodetest.Must(t, run.Complete(map[string]any{"ok": true}), http.StatusOK)
	_, whole, err := n.API.ProvenanceBothWays(run.TaskID)
	if err != nil {
		t.Fatal(err)
	}
	n.API.HideDeviceStreams()
	if _, _, err := n.API.ProvenanceBothWays(run.TaskID); err == nil {
		t.Fatal("the task's streams folded without its device's")
	}
	if got := mustProvenance(t, n, run.TaskID); !reflect.DeepEqual(got, whole) {
		t.Fatalf("provenance without the device streams:\n%v\nwant the whole log's\n%v", got, whole)
	}
}

// mustProvenance is the fields of GET /admin/tasks/{id}/provenance.
func mustProvenance(t *testing.T, n *nodetest.Node, id string) map[string]api.ProvenanceJSON {
	t.Helper()
	r := n.Admin("GET", "/tasks/"+id+"/provenance", nil)
	nodetest.Must(t, r, http.StatusOK)
	var doc struct {
		Fields map[string]api.ProvenanceJSON `json:"fields"`
	}
	if err := json.Unmarshal(r.Body, &doc); err != nil {
		t.Fatal(err)
	}
	return doc.Fields
}
