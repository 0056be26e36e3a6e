package projections

import (
	"bytes"
	"errors"
	"testing"

	"taskledger/events"
	"taskledger/ledger"
)

// sealed returns e sealed onto s's head with body encoded into it.
func sealed(t *testing.T, s *State, e *ledger.Event, body any) *ledger.Event {
	t.Helper()
	raw, err := events.EncodeBody(body)
	if err != nil {
		t.Fatal(err)
	}
	e.Body, e.Schema = raw, events.CurrentSchema(e.Type)
	if _, err := ledger.Seal(e, s.Head); err != nil {
		t.Fatal(err)
	}
	return e
}

// TestApplyDecodedEqualsApply: applying the body the sequencer built gives
// the projections that decoding the stored body gives.
func TestApplyDecodedEqualsApply(t *testing.T) {
	cfg := Config{IdempotencyRetentionMs: 3_600_000}
	viaBytes, viaBody := New(cfg), New(cfg)
	op := ledger.Actor{Kind: ledger.ActorOperator, ID: "op"}
	steps := []struct {
		e    ledger.Event
		body any
	}{
		{ledger.Event{Stream: events.DeviceStream("d1"), StreamVersion: 1, Type: events.EvDeviceRegistered, At: 1000, Actor: op,
			Idem: &ledger.Idem{Scope: "s", Key: "k1", Fingerprint: []byte{1}}},
			&events.DeviceRegistered{DeviceID: "d1", OwnerID: "o", Name: "n", HasChecks: true, RequiredChecks: []string{}, TokenHash: "h1"}},
		{ledger.Event{Stream: events.DeviceStream("d2"), StreamVersion: 1, Type: events.EvDeviceRegistered, At: 1000, Actor: op},
			&events.DeviceRegistered{DeviceID: "d2", OwnerID: "o", Name: "n", TokenHash: "h2"}},
		{ledger.Event{Stream: events.TaskStream("t1"), StreamVersion: 1, Type: events.EvTaskCreated, At: 2000, Actor: op,
			Idem: &ledger.Idem{Scope: "s", Key: "k2", Fingerprint: []byte{2}}},
			&events.TaskCreated{TaskID: "t1", Payload: `{}`, PayloadSHA256: "x", Authorization: &events.AuthBody{ID: "a1", Revision: 1, ExpiresAt: 1 << 40}}},
	}
	for _, st := range steps {
		a, b := st.e, st.e
		if err := viaBytes.Apply(sealed(t, viaBytes, &a, st.body)); err != nil {
			t.Fatal(err)
		}
		if err := viaBody.ApplyDecoded(sealed(t, viaBody, &b, st.body), st.body); err != nil {
			t.Fatal(err)
		}
	}
	x, err := viaBytes.Canonical()
	if err != nil {
		t.Fatal(err)
	}
	y, err := viaBody.Canonical()
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(x, y) {
		t.Fatal("ApplyDecoded and Apply give different projections")
	}
}

// TestApplyDecodedRefusesAnotherBodyType: a body that is not the event
// type's decoded body type is refused and changes nothing.
func TestApplyDecodedRefusesAnotherBodyType(t *testing.T) {
	s := New(Config{})
	body := &events.DeviceRegistered{DeviceID: "d1", TokenHash: "h"}
	e := sealed(t, s, &ledger.Event{Stream: events.DeviceStream("d1"), StreamVersion: 1, Type: events.EvTaskCreated, At: 1}, body)
	err := s.ApplyDecoded(e, body)
	if !errors.Is(err, events.ErrUnknownEvent) {
		t.Fatalf("got %v, want ErrUnknownEvent", err)
	}
	if s.Head.Seq != 0 || len(s.Devices) != 0 || len(s.Tasks) != 0 {
		t.Fatal("a refused event changed the projections")
	}
}
