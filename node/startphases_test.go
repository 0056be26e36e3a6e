package node_test

import (
	"bytes"
	"encoding/json"
	"testing"

	"github.com/rs/zerolog"

	"taskledger/node"
	"taskledger/node/nodetest"
)

// A start logs how long each of its steps took ("node started"), from the
// snapshot it loaded; the steps fit in the whole.
func TestStartLogsItsPhases(t *testing.T) {
	n := nodetest.Start(t)
	for range 5 {
		n.CreateTask(map[string]any{"a": 1})
	}
	if _, err := n.Snapshot(); err != nil {
		t.Fatal(err)
	}
	n.CreateTask(map[string]any{"after": "the snapshot"})
	head := n.Head()
	var buf bytes.Buffer
	n2 := n.Restart(func(c *node.Config) { c.Logger = zerolog.New(&buf) })
	p := n2.Started
	// The damage check runs beside the load: the start waits for what is
	// left of it.
	if p.Load <= 0 || p.DamageCheck <= 0 || p.ChainCheck <= 0 || p.DamageWait <= 0 ||
		p.Total < p.Load+p.DamageWait+p.ChainCheck+p.ReadModel || p.Total < p.DamageCheck {
		t.Fatalf("start-up phases %+v: each step measured, within the whole", p)
	}
	if p.WithoutDamageCheck() != p.Total-p.DamageWait {
		t.Fatalf("without the damage check: %v of %+v", p.WithoutDamageCheck(), p)
	}
	var line struct {
		Msg         string  `json:"message"`
		Total       float64 `json:"total"`
		DamageCheck float64 `json:"damage_check"`
		SnapshotSeq uint64  `json:"snapshot_seq"`
		Replayed    uint64  `json:"replayed"`
	}
	for _, l := range bytes.Split(buf.Bytes(), []byte("\n")) {
		if json.Unmarshal(l, &line) == nil && line.Msg == "node started" {
			break
		}
		line.Msg = ""
	}
	if line.Msg == "" {
		t.Fatalf("no \"node started\" line in the log:\n%s", buf.String())
	}
	if line.SnapshotSeq == 0 || line.SnapshotSeq+line.Replayed != head || line.Total <= 0 || line.DamageCheck <= 0 {
		t.Fatalf("start-up line %+v: a snapshot and the tail after it to head %d, with times", line, head)
	}
}
