package events

import (
	"os"
	"path/filepath"
	"reflect"
	"testing"
	"unsafe"

	"taskledger/internal/testfill"
	"taskledger/ledger"
)

// bodySamples returns, for every body type, encoded bodies: every field
// set, every field zero, and empty (not nil) slices and maps.
func bodySamples(t testing.TB) map[Type][][]byte {
	t.Helper()
	out := map[Type][][]byte{}
	f := &testfill.Filler{}
	for typ, c := range codecs {
		full, zero, empty := c.new(), c.new(), c.new()
		f.Fill(reflect.ValueOf(full).Elem())
		ev := reflect.ValueOf(empty).Elem()
		for i := 0; i < ev.NumField(); i++ {
			switch fv := ev.Field(i); fv.Kind() {
			case reflect.Slice:
				fv.Set(reflect.MakeSlice(fv.Type(), 0, 0))
			case reflect.Map:
				fv.Set(reflect.MakeMap(fv.Type()))
			}
		}
		for _, v := range []any{full, zero, empty} {
			b, err := EncodeBody(v)
			if err != nil {
				t.Fatal(err)
			}
			out[typ] = append(out[typ], b)
		}
	}
	return out
}

// checkBodyFast fails when the fast path decodes raw unlike the generic
// decoder; it reports whether the fast path took it.
func checkBodyFast(t testing.TB, typ Type, raw []byte) bool {
	t.Helper()
	c := codecs[typ]
	fast, shared, again := c.new(), c.new(), c.new()
	if !decodeBodyFast(raw, fast, nil) {
		return false
	}
	want := c.new()
	if err := ledger.Unmarshal(raw, want); err != nil {
		t.Fatalf("%s: the fast path took a body the generic decoder refuses (%v): %x", typ, err, raw)
	}
	if !reflect.DeepEqual(fast, want) {
		t.Fatalf("%s: fast %+v, generic %+v", typ, fast, want)
	}
	// Shared strings: the same values, read twice (the second time every
	// short string is one of the recent ones).
	var strs Strings
	strs.Offer("task-1")
	if !decodeBodyFast(raw, shared, &strs) || !decodeBodyFast(raw, again, &strs) ||
		!reflect.DeepEqual(shared, want) || !reflect.DeepEqual(again, want) {
		t.Fatalf("%s: shared %+v and %+v, generic %+v", typ, shared, again, want)
	}
	return true
}

// TestBodyFastMatchesGeneric: every body type has a plan, and its bodies
// (fully set, zero, empty collections, and every current-schema body of
// the v1 fixture log) decode by hand exactly as the generic decoder does.
func TestBodyFastMatchesGeneric(t *testing.T) {
	for typ, c := range codecs {
		if bodyPlans()[reflect.TypeOf(c.new()).Elem()] == nil {
			t.Errorf("%s: no fast plan", typ)
		}
	}
	for typ, samples := range bodySamples(t) {
		for i, b := range samples {
			if !checkBodyFast(t, typ, b) {
				t.Errorf("%s sample %d: not decoded by the fast path", typ, i)
			}
		}
	}
	src, err := os.ReadFile(filepath.Join("..", "projections", "testdata", "v1", "taskledger.db"))
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "taskledger.db"), src, 0o600); err != nil {
		t.Fatal(err)
	}
	store, err := ledger.Open(dir, ledger.Options{ReadOnly: true})
	if err != nil {
		t.Fatal(err)
	}
	defer store.Close()
	n := 0
	err = store.Range(0, func(e *ledger.Event) error {
		// Bodies of an older schema that only lacks fields decode into the
		// current type too (heartbeat schema 1 lacks one and renames none).
		if e.Schema == CurrentSchema(e.Type) || e.Type != EvTaskHeartbeat {
			if !checkBodyFast(t, e.Type, e.Body) {
				t.Errorf("seq %d %s: not decoded by the fast path", e.Seq, e.Type)
			}
			n++
		}
		return nil
	})
	if err != nil || n < 30 {
		t.Fatalf("fixture: %v (%d bodies)", err, n)
	}
}

// FuzzBodyFast: for any bytes and any body type, the fast path either
// declines or decodes as the generic decoder does.
func FuzzBodyFast(f *testing.F) {
	types := AllEventTypes()
	for typ, samples := range bodySamples(f) {
		for i, tt := range types {
			if tt == typ {
				for _, b := range samples {
					f.Add(uint8(i), b)
				}
			}
		}
	}
	f.Fuzz(func(t *testing.T, i uint8, raw []byte) {
		checkBodyFast(t, types[int(i)%len(types)], raw)
	})
}

// TestStringsShareRecentStrings: a short string read again while among
// the recent ones is the same string (no new allocation); long strings
// and strings that left the recent ones are read afresh, and offered
// strings are shared.
func TestStringsShareRecentStrings(t *testing.T) {
	var c Strings
	same := func(a, b string) bool { return a == b && unsafe.StringData(a) == unsafe.StringData(b) }
	id := c.share([]byte("0b6f1f5e-8c1d-4f43-9d3c-3b2f1f4a5e6d"))
	if again := c.share([]byte(id)); !same(again, id) {
		t.Fatal("a recent string was allocated again")
	}
	long := string(make([]byte, shareMax+1))
	if a, b := c.share([]byte(long)), c.share([]byte(long)); a != long || same(a, b) {
		t.Fatal("a long string was shared")
	}
	held := "device-7"
	c.Offer(held)
	if got := c.share([]byte("device-7")); !same(got, held) {
		t.Fatal("an offered string was not shared")
	}
	for i := range len(c.recent) {
		c.share([]byte{byte('a' + i)})
	}
	if got := c.share([]byte(id)); got != id || same(got, id) {
		t.Fatal("a string that left the recent ones was shared")
	}
	if c.share(nil) != "" {
		t.Fatal("nil is not the empty string")
	}
}
