package ledger

import (
	"math"
	"os"
	"path/filepath"
	"reflect"
	"testing"

	"github.com/vmihailenco/msgpack/v5"
)

// generic is DecodeEvent without the fast path.
func generic(b []byte) (Event, error) {
	var e Event
	err := msgpack.Unmarshal(b, &e)
	return e, err
}

func fastEvents(t testing.TB) [][]byte {
	body := func(v any) msgpack.RawMessage {
		b, err := Marshal(v)
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	events := []*Event{
		{Seq: 1, Stream: "task/a", StreamVersion: 1, Type: "task.created", Schema: 1, At: 1_800_000_000_000,
			Actor: Actor{Kind: ActorOperator, ID: "op"}, Idem: &Idem{Scope: "s", Key: "k", Fingerprint: []byte{1, 2}},
			Body:     body(map[string]any{"task_id": "a", "n": -3, "f": 1.5, "list": []any{"x", nil, true, uint64(math.MaxUint64)}, "bin": []byte{9}}),
			PrevHash: ZeroHash, Hash: make([]byte, HashSize)},
		{Seq: math.MaxUint64, Stream: "", Type: "device.revoked", Schema: 2, At: -5,
			Actor: Actor{Kind: ActorDevice, ID: "d", Owner: "o"}, Body: body(nil)},
		{Seq: 70000, StreamVersion: 1 << 40, Type: "x", Schema: 300, At: 1 << 33, Idem: &Idem{Fingerprint: []byte{}},
			Body: body(map[string]any{"big": make([]byte, 70000), "s": string(make([]byte, 300))}), PrevHash: []byte{}},
	}
	var out [][]byte
	for _, e := range events {
		b, err := Marshal(e)
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, b)
	}
	return out
}

// TestDecodeEventFast: the envelopes Marshal writes take the fast path and
// decode exactly as the generic decoder does, including every event of
// the v1 fixture log.
func TestDecodeEventFast(t *testing.T) {
	all := fastEvents(t)
	src, err := os.ReadFile(filepath.Join("..", "projections", "testdata", "v1", "taskledger.db"))
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "taskledger.db"), src, 0o600); err != nil {
		t.Fatal(err)
	}
	s, err := Open(dir, Options{ReadOnly: true})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if err := s.RangeRaw(0, func(_ uint64, raw []byte) error {
		all = append(all, append([]byte(nil), raw...))
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	if len(all) < 40 {
		t.Fatalf("only %d envelopes", len(all))
	}
	for i, b := range all {
		var fast, interned, transient Event
		if !decodeEventFast(b, &fast, nil) || !decodeEventFast(b, &interned, &interner{}) ||
			!decodeEventFast(b, &transient, &interner{transient: true}) {
			t.Fatalf("envelope %d does not take the fast path", i)
		}
		if !reflect.DeepEqual(fast, interned) || !reflect.DeepEqual(fast, transient) {
			t.Fatalf("envelope %d: interned %+v, transient %+v, plain %+v", i, interned, transient, fast)
		}
		want, err := generic(b)
		if err != nil || !reflect.DeepEqual(fast, want) {
			t.Fatalf("envelope %d: fast %+v, generic %+v (%v)", i, fast, want, err)
		}
	}
}

// FuzzDecodeEvent: for any bytes, DecodeEvent and the generic decoder
// agree (the fast path declines what it does not handle).
func FuzzDecodeEvent(f *testing.F) {
	for _, b := range fastEvents(f) {
		f.Add(b)
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		var fast, transient Event
		if !decodeEventFast(b, &fast, &interner{}) {
			return
		}
		want, err := generic(b)
		if err != nil {
			t.Fatalf("fast path accepted what the generic decoder refuses: %v", err)
		}
		if !reflect.DeepEqual(fast, want) {
			t.Fatalf("fast %+v, generic %+v", fast, want)
		}
		if !decodeEventFast(b, &transient, &interner{transient: true}) || !reflect.DeepEqual(transient, want) {
			t.Fatalf("transient %+v, generic %+v", transient, want)
		}
	})
}

// TestRangeTransientLendsWhatRangeGives: RangeTransient calls back with
// the events Range gives (the event, its Idem, Body and PrevHash lent for
// the call), streams repeated or not.
func TestRangeTransientLendsWhatRangeGives(t *testing.T) {
	s := mustOpen(t, t.TempDir())
	head := GenesisHead()
	var all []*Event
	versions := map[string]uint64{}
	for _, stream := range []string{"task/a", "task/a", "task/b", "task/a", "device/c", "task/b"} {
		versions[stream]++
		evs, h := sealed(t, head, 1, stream, versions[stream])
		if err := s.Append(&Batch{Expected: head, Events: evs}); err != nil {
			t.Fatal(err)
		}
		head, all = h, append(all, evs...)
	}
	var want, got []Event
	if err := s.Range(0, func(e *Event) error { want = append(want, *e); return nil }); err != nil {
		t.Fatal(err)
	}
	var lent *Event
	err := s.RangeTransient(0, func(e *Event) error {
		if lent != nil && e != lent {
			t.Fatal("RangeTransient does not reuse its event")
		}
		lent = e
		c := *e
		c.Body, c.PrevHash = append([]byte(nil), e.Body...), append([]byte(nil), e.PrevHash...)
		if e.Idem != nil {
			idem := *e.Idem
			c.Idem = &idem
		}
		got = append(got, c)
		return nil
	})
	if err != nil || len(want) != len(all) || !reflect.DeepEqual(got, want) {
		t.Fatalf("transient %+v (%v), want %+v", got, err, want)
	}
}
