package api_test

import (
	"net/http"
	"slices"
	"testing"
	"time"

	"taskledger/node/nodetest"
)

// The device_id filter of the task list answers from the tasks devices
// hold (not a walk of every task): it must list exactly the tasks whose
// current claim names the device, newest first, page by page, whatever
// else the ledger holds — finished tasks (no claim), pending ones, an
// expired claim the device moved on from — and the same after a restart.
func TestDeviceFilterListsExactlyTheDevicesClaims(t *testing.T) {
	n := nodetest.Start(t)
	devs := []*nodetest.Device{n.ReadyDevice(t), n.ReadyDevice(t), n.ReadyDevice(t)}
	// d0 runs a task to its end and claims the next; d1 runs one and
	// holds it; d2's claim expires, and it claims again.
	done := n.StartTask(t, devs[0], map[string]any{"n": 0})
	nodetest.Must(t, done.Complete(map[string]any{"ok": true}), http.StatusOK)
	n.StartTask(t, devs[1], map[string]any{"n": 1})
	for i := range 6 {
		n.CreateTask(map[string]any{"n": 10 + i})
	}
	devs[0].MustClaim(t)
	devs[2].MustClaim(t)
	n.Advance(11 * time.Minute) // past the claim lease (10 min)
	nodetest.Must(t, devs[2].Ready(), http.StatusOK)
	devs[2].MustClaim(t)

	check := func(n *nodetest.Node) {
		t.Helper()
		all := listedTasks(t, n, "limit=500", 0)
		for _, d := range devs {
			var want []string
			for _, task := range all {
				if c, ok := task["claim"].(map[string]any); ok && c["device_id"] == d.ID {
					want = append(want, nodetest.Str(task, "id"))
				}
			}
			if len(want) == 0 {
				t.Fatalf("device %s holds nothing: the scenario did not set up a claim", d.ID)
			}
			for _, state := range []string{"", "CLAIMED", "SUCCEEDED"} {
				q := "device_id=" + d.ID
				if state != "" {
					q = "state=" + state + "&" + q
				}
				var w []string
				for _, task := range all {
					if slices.Contains(want, nodetest.Str(task, "id")) && (state == "" || nodetest.Str(task, "state") == state) {
						w = append(w, nodetest.Str(task, "id"))
					}
				}
				for _, limit := range []string{"&limit=500", "&limit=1"} {
					var got []string
					for _, task := range listedTasks(t, n, q+limit, 50) {
						got = append(got, nodetest.Str(task, "id"))
					}
					if !slices.Equal(got, w) {
						t.Fatalf("%s%s lists %v, want %v", q, limit, got, w)
					}
				}
			}
		}
	}
	check(n)
	check(n.Restart())
}

// listedTasks reads every page of the task list for query (at most pages
// pages; 0: the first only).
func listedTasks(t *testing.T, n *nodetest.Node, query string, pages int) []map[string]any {
	t.Helper()
	var out []map[string]any
	cursor := ""
	for p := 0; ; p++ {
		r := n.Do("GET", nodetest.AdminPath+"/tasks?"+query+cursor, n.AdminToken, nil, nil)
		nodetest.Must(t, r, http.StatusOK)
		doc := r.JSON()
		for _, x := range doc["tasks"].([]any) {
			out = append(out, x.(map[string]any))
		}
		next, _ := doc["next_cursor"].(string)
		if next == "" || p >= pages {
			return out
		}
		cursor = "&cursor=" + next
	}
}
