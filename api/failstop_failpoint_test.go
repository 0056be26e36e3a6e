//go:build failpoints

package api_test

import (
	"errors"
	"net/http"
	"testing"

	"taskledger/api"
	"taskledger/commands"
	"taskledger/internal/failpoint"
	"taskledger/node/nodetest"
)

// A commit whose write or sync of the log fails (the failpoints in the
// bbolt store: before the transaction's pages are written, and after they
// reached the file as a failed fdatasync leaves them) answers 503, and
// from then on nothing is acknowledged until the node restarts: not the
// replay of the failed command's key (even once the disk works again),
// not a new command, not a read; /readyz names the fence, /healthz stays
// 200. After the restart every command acknowledged before the failure
// is there and the log verifies.
func TestFailedCommitAcknowledgesNothingUntilRestart(t *testing.T) {
	for _, point := range []string{failpoint.CommitWrite, failpoint.CommitSync} {
		for _, act := range []string{"eio", "enospc"} {
			t.Run(point+"="+act, func(t *testing.T) {
				n := nodetest.Start(t)
				acked := n.CreateTask(map[string]any{"n": 1})
				d := n.ReadyDevice(t)
				create := func(key string) *nodetest.Resp {
					return n.Do("POST", nodetest.AdminPath+"/tasks", n.AdminToken,
						map[string]any{"payload": map[string]any{"n": 2}}, map[string]string{"Idempotency-Key": key})
				}
				key := nodetest.NewKey()
				restore := mustFailpoint(t, point, act)
				mustUnavailable(t, "the command whose commit failed", create(key))
				restore() // the disk works again: the node still acknowledges nothing
				mustUnavailable(t, "the replay of the failed command's key", create(key))
				mustUnavailable(t, "a new command", create(nodetest.NewKey()))
				mustUnavailable(t, "a device heartbeat", d.Ready())
				mustUnavailable(t, "a read of an acknowledged task", n.Do("GET", nodetest.AdminPath+"/tasks/"+acked, n.AdminToken, nil, nil))
				mustUnavailable(t, "the task list", n.Do("GET", nodetest.AdminPath+"/tasks", n.AdminToken, nil, nil))
				mustNotReady(t, n, api.NotReadyFenced)
				nodetest.Must(t, n.Do("GET", "/healthz", "", nil, nil), http.StatusOK)
				select {
				case <-n.Engine.Fenced():
				default:
					t.Fatal("the engine is not fenced after a failed commit")
				}
				if err := n.Engine.Err(); !errors.Is(err, commands.ErrFenced) {
					t.Fatalf("engine error %v, want ErrFenced", err)
				}

				n = n.Restart() // Close verifies the log
				if st, _ := n.State(acked); st != "PENDING" {
					t.Fatalf("acknowledged task after the restart: state %q", st)
				}
				nodetest.Must(t, n.Do("GET", "/readyz", "", nil, nil), http.StatusOK)
				if r := create(key); r.Status != http.StatusCreated {
					t.Fatalf("the failed command's key after the restart: %d %s, want 201", r.Status, r.Body)
				}
			})
		}
	}
}
