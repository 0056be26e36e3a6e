package node_test

import (
	"errors"
	"os"
	"testing"
	"time"

	"taskledger/commands"
	"taskledger/node"
	"taskledger/node/nodetest"
	"taskledger/snapshots"
)

// TestSnapshotOverAFailedBatchIsNotWritten: a snapshot whose capture saw
// an event of a batch that then failed writes nothing (the copy holds an
// event the log does not); one taken after the reload writes committed
// state only (the node's cleanup verifies every snapshot against the log).
func TestSnapshotOverAFailedBatchIsNotWritten(t *testing.T) {
	fl := &holdLog{entered: make(chan struct{}, 1), fail: errors.New("holdLog: the disk is gone")}
	n := nodetest.Start(t, every(0), func(c *node.Config) {
		c.WrapLog = func(l commands.Log) commands.Log { fl.inner = l; return fl }
	})
	n.CreateTask(map[string]any{"committed": true})
	for attempt := 0; ; attempt++ {
		if attempt == 20 {
			t.Fatal("in 20 attempts no capture reached the sequencer while the failing batch was in flight")
		}
		fl.release = make(chan struct{})
		fl.hold.Store(true)
		created := make(chan int, 1)
		go func() {
			created <- n.Do("POST", "/api/v1/admin/tasks", n.AdminToken, map[string]any{"payload": map[string]any{"lost": true}}, nil).Status
		}()
		<-fl.entered // the batch is in flight; it will fail
		before, _ := os.ReadDir(snapshots.Dir(n.Dir))
		snapped := make(chan error, 1)
		go func() {
			_, err := n.Node.Snapshot()
			snapped <- err
		}()
		time.Sleep(20 * time.Millisecond) // lets the capture reach the sequencer first (else the attempt is repeated)
		close(fl.release)
		if st := <-created; st < 500 {
			t.Fatalf("the command of the failed batch: %d", st)
		}
		err := <-snapped
		if err == nil {
			continue // taken after the failure and the reload: nothing to show here
		}
		if !errors.Is(err, commands.ErrUnavailable) {
			t.Fatalf("snapshot over a failed batch: %v, want ErrUnavailable", err)
		}
		after, _ := os.ReadDir(snapshots.Dir(n.Dir))
		if len(after) != len(before) {
			t.Fatalf("%d snapshot files after the failed capture, %d before", len(after), len(before))
		}
		return
	}
}
