package projections_test

import (
	"bytes"
	"crypto/sha256"
	"errors"
	"flag"
	"os"
	"path/filepath"
	"testing"

	"taskledger/commands"
	"taskledger/events"
	"taskledger/ledger"
	"taskledger/node"
	"taskledger/node/nodetest"
	"taskledger/projections"
)

var updateGolden = flag.Bool("update-golden", false, "rewrite testdata/heartbeat-schema2.envelope")

// TestHeartbeatSchema2 is the schema change itself: new heartbeats are
// written with schema 2 and carry the lease they extended; schema 1
// decodes through the upcaster into the same type.
func TestHeartbeatSchema2(t *testing.T) {
	if got := events.CurrentSchema(events.EvTaskHeartbeat); got != 2 {
		t.Fatalf("task.heartbeat is written with schema %d, want 2", got)
	}
	v1, _ := ledger.Marshal(map[string]any{"task_id": "t", "device_id": "d", "claim_generation": 3, "execution_id": "x",
		"lease_expires_at": int64(5000), "step": "s", "client_time": nil})
	b, err := events.DecodeBody(events.EvTaskHeartbeat, 1, v1)
	if err != nil {
		t.Fatal(err)
	}
	hb := b.(*events.TaskHeartbeat)
	if hb.TaskID != "t" || hb.Generation != 3 || hb.LeaseExpiresAt != 5000 || hb.Step != "s" || hb.PreviousExpiresAt != 0 {
		t.Fatalf("upcast schema 1: %+v", hb)
	}
	if _, err := events.DecodeBody(events.EvTaskHeartbeat, 3, v1); !errors.Is(err, projections.ErrUnknownEvent) {
		t.Fatalf("schema 3 decoded: %v", err)
	}
}

// TestGoldenHeartbeatSchema2 freezes the encoding of a schema-2 envelope
// built from fixed values.
func TestGoldenHeartbeatSchema2(t *testing.T) {
	ct := int64(1767323045500)
	body, _ := events.EncodeBody(&events.TaskHeartbeat{TaskID: "690e2e6c-06ad-4a1d-b5bc-3bddbccef42b",
		DeviceID: "d3a694c7-b737-42a7-b606-d91a1208619e", Generation: 1, ExecutionID: "0b7bd0f5-1f4a-4c3e-9a39-0f2f0c1f5b1e",
		PreviousExpiresAt: 1767323135000, LeaseExpiresAt: 1767323145000, Step: "open-app", ClientTime: &ct})
	e := &ledger.Event{Stream: "task/690e2e6c-06ad-4a1d-b5bc-3bddbccef42b", StreamVersion: 6,
		Type: events.EvTaskHeartbeat, Schema: 2, At: 1767323055000,
		Actor: ledger.Actor{Kind: ledger.ActorDevice, ID: "d3a694c7-b737-42a7-b606-d91a1208619e", Owner: "1d3a9dad-6bc1-4e2c-b071-23c9780ab0f2"},
		Idem:  &ledger.Idem{Scope: "device:d3a694c7-b737-42a7-b606-d91a1208619e:heartbeat", Key: "996f94f8-edf3-4faa-8ef9-5bb81b09cd0f", Fingerprint: bytes.Repeat([]byte{7}, 32)},
		Body:  body}
	prev := sha256.Sum256([]byte("previous"))
	if _, err := ledger.Seal(e, ledger.Head{Seq: 11, Hash: prev[:], At: 1767323050000}); err != nil {
		t.Fatal(err)
	}
	got, err := ledger.Marshal(e)
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join("testdata", "heartbeat-schema2.envelope")
	if *updateGolden {
		if err := os.WriteFile(path, got, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	golden, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, golden) {
		t.Fatalf("schema-2 envelope encodes differently from %s", path)
	}
	back, err := ledger.DecodeEvent(golden)
	if err != nil {
		t.Fatal(err)
	}
	if h, _ := ledger.ComputeHash(&back); !bytes.Equal(h, back.Hash) {
		t.Fatal("golden hash mismatch")
	}
	b, err := events.DecodeBody(back.Type, back.Schema, back.Body)
	if err != nil || b.(*events.TaskHeartbeat).PreviousExpiresAt != 1767323135000 {
		t.Fatalf("golden body: %+v %v", b, err)
	}
}

// TestFixtureContinuesWithSchema2 starts a real node on the v1 fixture
// (with its claim-token secret), runs a heartbeat through it, and checks
// the log then holds both schemas and still verifies (the nodetest cleanup
// verifies and compares a replay with the live projections).
func TestFixtureContinuesWithSchema2(t *testing.T) {
	dir := copyFixture(t)
	tok := "tladm_" + "fixture-admin-token-for-tests-0000000000000"
	store, err := ledger.Open(dir, ledger.Options{})
	if err != nil {
		t.Fatal(err)
	}
	h := sha256.Sum256([]byte(tok))
	if err := store.PutAdminToken("fixture", h[:]); err != nil {
		t.Fatal(err)
	}
	store.Close()
	if err := os.WriteFile(filepath.Join(dir, node.InitialTokenFile), []byte(tok), 0o600); err != nil {
		t.Fatal(err)
	}
	secret := []byte(nil)
	for i := 0; i < 16; i++ {
		secret = append(secret, 0x5e, 0xed)
	}
	n := nodetest.Start(t, nodetest.WithDir(dir), nodetest.WithConfig(func(c *commands.Config) { c.ClaimSecret = secret }))
	id := n.CreateTask(map[string]any{"after": "fixture"})
	d := n.RegisterDevice()
	nodetest.Must(t, d.Ready(), 200)
	r, tok2 := d.Claim() // the requeued fixture task has no authorization; the new one is claimed
	nodetest.Must(t, r, 200)
	taskID := nodetest.Str(r.JSON()["task"].(map[string]any), "id")
	if taskID != id {
		t.Fatalf("claimed %s, want %s", taskID, id)
	}
	s := d.Call(id, "start", tok2, map[string]any{"claim_generation": 1, "expected_version": 2}, "")
	nodetest.Must(t, s, 200)
	ex := nodetest.Str(s.JSON(), "execution_id")
	before := nodetest.Str(n.Task(id)["execution"].(map[string]any), "lease_expires_at")
	nodetest.Must(t, d.Call(id, "heartbeat", tok2, map[string]any{"claim_generation": 1, "execution_id": ex, "step": "go"}, ""), 200)

	ev := n.Do("GET", "/api/v1/admin/tasks/"+id+"/events", n.AdminToken, nil, nil)
	nodetest.Must(t, ev, 200)
	evs := ev.JSON()["events"].([]any)
	last := evs[len(evs)-1].(map[string]any)
	if last["type"] != string(events.EvTaskHeartbeat) || last["schema"] != float64(2) {
		t.Fatalf("last event %v", last)
	}
	if got := last["body"].(map[string]any)["previous_lease_expires_at"]; got != before {
		t.Fatalf("previous_lease_expires_at %v, want %s", got, before)
	}
	schemas := map[int]int{}
	n.Close()
	store, err = ledger.Open(dir, ledger.Options{ReadOnly: true})
	if err != nil {
		t.Fatal(err)
	}
	defer store.Close()
	_ = store.Range(0, func(e *ledger.Event) error {
		if e.Type == events.EvTaskHeartbeat {
			schemas[e.Schema]++
		}
		return nil
	})
	if schemas[1] != 4 || schemas[2] != 1 {
		t.Fatalf("heartbeat schemas in the log: %v", schemas)
	}
	if _, err := node.Verify(store, projections.Config{IdempotencyRetentionMs: 72 * 3600 * 1000}, secret); err != nil {
		t.Fatalf("verify with both schemas: %v", err)
	}
}

// TestHeartbeatLeaseChainChecked proves replay uses the new field: a
// schema-2 heartbeat naming another previous lease is refused.
func TestHeartbeatLeaseChainChecked(t *testing.T) {
	n := nodetest.Start(t)
	id := n.CreateTask(nil)
	d := n.RegisterDevice()
	nodetest.Must(t, d.Ready(), 200)
	r, tok := d.Claim()
	nodetest.Must(t, r, 200)
	s := d.Call(id, "start", tok, map[string]any{"claim_generation": 1, "expected_version": 2}, "")
	nodetest.Must(t, s, 200)
	var canon []byte
	var cfg projections.Config
	n.Engine.Read(func(x *projections.State) { canon, _ = x.Canonical(); cfg = x.Config() })
	apply := func(prevDelta int64) error {
		st, err := projections.Restore(canon, cfg)
		if err != nil {
			t.Fatal(err)
		}
		task := st.Tasks[id]
		body, _ := events.EncodeBody(&events.TaskHeartbeat{TaskID: id, DeviceID: d.ID, Generation: 1,
			ExecutionID: task.Exec.ID, PreviousExpiresAt: task.Exec.LeaseExpiresAt + prevDelta,
			LeaseExpiresAt: task.Exec.LeaseExpiresAt + 1000})
		e := &ledger.Event{Stream: events.TaskStream(id), StreamVersion: task.StreamVersion + 1,
			Type: events.EvTaskHeartbeat, Schema: 2, At: st.Head.At,
			Actor: ledger.Actor{Kind: ledger.ActorDevice, ID: d.ID, Owner: d.OwnerID}, Body: body}
		if _, err := ledger.Seal(e, st.Head); err != nil {
			t.Fatal(err)
		}
		return st.Apply(e)
	}
	if err := apply(0); err != nil {
		t.Fatalf("a heartbeat extending the running lease: %v", err)
	}
	if err := apply(-1); !errors.Is(err, projections.ErrInvariant) {
		t.Fatalf("a heartbeat extending another lease applied: %v", err)
	}
}
