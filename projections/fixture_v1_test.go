package projections_test

import (
	"bytes"
	"encoding/hex"
	"os"
	"path/filepath"
	"taskledger/wire"
	"testing"

	"taskledger/events"
	"taskledger/ledger"
	"taskledger/node"
	"taskledger/projections"
)

// The fixture log of testdata/v1 was written by the real server before any
// event type had a second schema (see testdata/genv1). It must replay and
// verify forever (STYLE.md §14).

const fixtureDir = "testdata/v1"

// fixtureSecret is the claim-token secret the fixture was written with.
const fixtureSecret = "5eed5eed5eed5eed5eed5eed5eed5eed5eed5eed5eed5eed5eed5eed5eed5eed"

// copyFixture copies the fixture into a temporary data directory, so no
// test ever opens the committed file.
func copyFixture(t testing.TB) string {
	t.Helper()
	return copyFixtureDir(t, fixtureDir)
}

// copyFixtureDir copies the fixture in src into a temporary data directory.
func copyFixtureDir(t testing.TB, src string) string {
	t.Helper()
	dst := t.TempDir()
	err := filepath.WalkDir(src, func(p string, d os.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(src, p)
		if d.IsDir() {
			return os.MkdirAll(filepath.Join(dst, rel), 0o700)
		}
		b, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		return os.WriteFile(filepath.Join(dst, rel), b, 0o600)
	})
	if err != nil {
		t.Fatal(err)
	}
	return dst
}

func TestV1FixtureReplaysAndVerifies(t *testing.T) {
	dir := copyFixture(t)
	store, err := ledger.Open(dir, ledger.Options{ReadOnly: true})
	if err != nil {
		t.Fatal(err)
	}
	defer store.Close()
	secret, _ := hex.DecodeString(fixtureSecret)
	rep, err := node.Verify(store, projections.Config{IdempotencyRetentionMs: 72 * 3600 * 1000}, secret)
	if err != nil {
		t.Fatalf("verify: %v", err)
	}
	if rep.Events != 46 {
		t.Fatalf("fixture has %d events, want 46", rep.Events)
	}
	types := map[events.Type]bool{}
	schema1 := 0
	err = store.Range(0, func(e *ledger.Event) error {
		types[e.Type] = true
		if e.Type == events.EvTaskHeartbeat && e.Schema == 1 {
			schema1++
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	// Event types added after the fixture was frozen cannot be in it.
	later := map[events.Type]bool{events.EvAdminTokenCreated: true, events.EvAdminTokenRevoked: true}
	for _, typ := range events.AllEventTypes() {
		if !types[typ] && !later[typ] {
			t.Errorf("the fixture has no %s event", typ)
		}
	}
	if schema1 != 4 {
		t.Errorf("fixture has %d schema-1 heartbeats, want 4", schema1)
	}
	states := rep.State.StateCounts() // the ended tasks settled: counted, not in memory
	want := map[wire.State]int{projections.StateSucceeded: 1, projections.StateFailed: 2, projections.StateCanceled: 2,
		projections.StatePending: 1}
	for st, n := range want {
		if states[string(st)] != n {
			t.Errorf("%d tasks %s, want %d (all: %v)", states[string(st)], st, n, states)
		}
	}
}

// TestGoldenHeartbeatEnvelope freezes the msgpack encoding of one stored
// envelope: it decodes, its hash still matches, it re-encodes to the same
// bytes, and it is the event the fixture log stores at its seq.
func TestGoldenHeartbeatEnvelope(t *testing.T) {
	golden, err := os.ReadFile(filepath.Join(fixtureDir, "heartbeat-schema1.envelope"))
	if err != nil {
		t.Fatal(err)
	}
	e, err := ledger.DecodeEvent(golden)
	if err != nil {
		t.Fatal(err)
	}
	if e.Type != events.EvTaskHeartbeat || e.Schema != 1 {
		t.Fatalf("golden is %s schema %d", e.Type, e.Schema)
	}
	if h, err := ledger.ComputeHash(&e); err != nil || !bytes.Equal(h, e.Hash) {
		t.Fatalf("golden hash does not match: %v", err)
	}
	re, err := ledger.Marshal(&e)
	if err != nil || !bytes.Equal(re, golden) {
		t.Fatalf("golden does not re-encode to the same bytes")
	}
	body, err := events.DecodeBody(e.Type, e.Schema, e.Body)
	if err != nil {
		t.Fatal(err)
	}
	hb := body.(*events.TaskHeartbeat)
	if hb.Step != "open-app" || hb.Generation != 1 || hb.ClientTime == nil || hb.LeaseExpiresAt != e.At+90_000 {
		t.Fatalf("golden body decoded as %+v", hb)
	}
	dir := copyFixture(t)
	store, err := ledger.Open(dir, ledger.Options{ReadOnly: true})
	if err != nil {
		t.Fatal(err)
	}
	defer store.Close()
	var stored []byte
	_ = store.RangeRaw(e.Seq-1, func(seq uint64, raw []byte) error {
		stored = append([]byte(nil), raw...)
		return ledger.ErrStop
	})
	if !bytes.Equal(stored, golden) {
		t.Fatalf("the fixture log stores other bytes at seq %d", e.Seq)
	}
}
