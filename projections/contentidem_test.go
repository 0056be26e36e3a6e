package projections

import (
	"bytes"
	"fmt"
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/google/uuid"

	"taskledger/ledger"
)

// TestLoadedRecordsAreFoundByTheirIDs: every record of a restored
// snapshot is found by its id (compared in place with the record's scope
// and key) and decodes to the record encoded, UUIDs and all; an id
// without a record is not found.
func TestLoadedRecordsAreFoundByTheirIDs(t *testing.T) {
	s := contentState(t)
	r := restoredFindsEveryRecord(t, s)
	if must(r.Idem.loadedRecord("device:d0:op\x00k")) != nil || must(r.Idem.loadedRecord("")) != nil {
		t.Error("an id without a record was found")
	}
}

// TestLoadedKeysHeldAsUUIDsAreFound: in one scope, keys held in 16 bytes
// (canonical UUIDs) and keys held as text (anything else) sort among each
// other as their text does, so a restored section finds every one and
// nothing in between.
func TestLoadedKeysHeldAsUUIDsAreFound(t *testing.T) {
	s := New(Config{IdempotencyRetentionMs: 1000})
	s.Head = ledger.Head{Seq: 1, Hash: bytes.Repeat([]byte{7}, ledger.HashSize), At: 1_800_000_000_000}
	var keys []string
	for i := range 64 {
		keys = append(keys, uuid.NewString())
		keys = append(keys, fmt.Sprintf("%x", i*4)) // text among the UUIDs: "0", "4", … "fc"
	}
	keys = append(keys, "zzz", "", "0F1E2D3C-4B5A-4978-8695-A4B3C2D1E0F9")
	for i, k := range keys {
		for _, scope := range []string{"device:a:start", "device:a:start2"} {
			s.Idem.put(&IdemRecord{Scope: scope, Key: k, At: s.Head.At, Seq: uint64(i + 1), TaskID: uuid.NewString()})
		}
	}
	r := restoredFindsEveryRecord(t, s)
	for id := range s.Idem.Records {
		if got := must(r.Idem.loadedRecord(id + "~")); got != nil {
			t.Errorf("%q~, never recorded, found as %#v", id, got)
		}
	}
	if got := must(r.Idem.loadedRecord(IdemID("device:a:start", uuid.NewString()))); got != nil {
		t.Errorf("a fresh key found as %#v", got)
	}
}

// restoredFindsEveryRecord restores s from its canonical bytes and checks
// that every record of s is found among the loaded ones, decoded as it was.
func restoredFindsEveryRecord(t *testing.T, s *State) *State {
	t.Helper()
	r, err := Restore(must(s.Canonical()), s.Config())
	if err != nil {
		t.Fatal(err)
	}
	for id, rec := range s.Idem.Records {
		if got := must(r.Idem.loadedRecord(id)); !reflect.DeepEqual(got, rec) {
			t.Errorf("looking up %q in the loaded records: %#v, want %#v", id, got, rec)
		}
	}
	return r
}

// TestUUIDStringsTakeSeventeenBytes: a canonical UUID is written as 0 and
// its 16 bytes and reads back as the same string; anything else that only
// looks like one is written as it is.
func TestUUIDStringsTakeSeventeenBytes(t *testing.T) {
	for _, c := range []struct {
		s    string
		size int
	}{
		{"c3ad6e54-c56b-4016-8000-00000002d9c7", 17},
		{"00000000-0000-0000-0000-000000000000", 17},
		{"ffffffff-ffff-ffff-ffff-ffffffffffff", 17},
		{"C3AD6E54-C56B-4016-8000-00000002D9C7", 37}, // uppercase: uuid.String never writes it
		{"c3ad6e54-c56b-4016-8000-00000002d9c", 36},
		{"c3ad6e54-c56b-4016-8000-00000002d9c7a", 38},
		{"c3ad6e54xc56b-4016-8000-00000002d9c7", 37},
		{"c3ad6e54-c56b-4016-8000-00000002d9g7", 37},
		{"c3ad6e5-4c56b-4016-8000-00000002d9c7", 37},
		{"", 1},
	} {
		e := newEncBuf(0)
		e.ustr(c.s)
		e.str("after")
		if len(e.b) != c.size+6 {
			t.Errorf("%q took %d bytes, want %d", c.s, len(e.b)-6, c.size)
		}
		d := &decBuf{s: string(e.b)}
		if got := d.ustr(); got != c.s || d.str() != "after" || d.err != nil {
			t.Errorf("%q read back as %q (%v)", c.s, got, d.err)
		}
		d = &decBuf{s: string(e.b)}
		if d.skipUstr(); d.str() != "after" {
			t.Errorf("skipping %q lost the place", c.s)
		}
	}
	d := &decBuf{s: "\x00short"}
	if d.ustr(); d.err == nil {
		t.Error("a truncated UUID read without an error")
	}
}

// TestIdemIDsCompareAsTheirStrings: the comparison that spares building
// an id (scope + "\x00" + key) orders ids exactly as the strings do,
// whether a key is held as its text or as a UUID's 16 bytes, scopes that
// are prefixes of others and strings holding NUL included.
func TestIdemIDsCompareAsTheirStrings(t *testing.T) {
	parts := []string{"", "a", "ab", "a\x00", "a\x00b", "b", "\x00", "\x00\x00", "device:1:claim-next", "device:1:claim"}
	keys := append(slices.Clone(parts), "0f1e2d3c-4b5a-4978-8695-a4b3c2d1e0f9", "0f1e2d3c-4b5a-4978-8695-a4b3c2d1e0fa",
		"9f1e2d3c-4b5a-4978-8695-a4b3c2d1e0f9", "af1e2d3c-4b5a-4978-8695-a4b3c2d1e0f9", "0f1e2d3c-4b5a-4978-8695-a4b3c2d1e0f",
		"0F1E2D3C-4B5A-4978-8695-A4B3C2D1E0F9", "0f1e2d3c-4b5a-4978-8695-a4b3c2d1e0f9x")
	sign := func(c int) int { return max(-1, min(1, c)) }
	held := func(k string) []idemKey { return []idemKey{keyOf(k), {s: k}} } // as a section would hold it, and as text
	for _, s1 := range parts {
		for _, k1 := range keys {
			id := IdemID(s1, k1)
			if qs, qk := splitIdemID(id); cmpScopeKeys(qs, qk, s1, keyOf(k1)) != 0 {
				t.Errorf("%q split as %q, %q: not equal to itself", id, qs, qk)
			}
			for _, s2 := range parts {
				for _, k2 := range keys {
					want := sign(strings.Compare(id, IdemID(s2, k2)))
					for _, h1 := range held(k1) {
						for _, h2 := range held(k2) {
							if got := sign(cmpScopeKeys(s1, h1, s2, h2)); got != want {
								t.Errorf("cmpScopeKeys(%q, %+v, %q, %+v) = %d, want %d", s1, h1, s2, h2, got, want)
							}
						}
					}
				}
			}
		}
	}
	if k := keyOf("0f1e2d3c-4b5a-4978-8695-a4b3c2d1e0f9"); !k.u || len(k.s) != 16 || k.String() != "0f1e2d3c-4b5a-4978-8695-a4b3c2d1e0f9" {
		t.Errorf("a canonical UUID key held as %+v", k)
	}
	if k := keyOf("0F1E2D3C-4B5A-4978-8695-A4B3C2D1E0F9"); k.u {
		t.Error("an uppercase UUID held in 16 bytes: it would not read back as written")
	}
}

func must[T any](v T, err error) T {
	if err != nil {
		panic(err)
	}
	return v
}

// splitIdemID returns the scope and the key of an id (IdemID).
func splitIdemID(id string) (scope string, key idemKey) {
	scope, k, _ := strings.Cut(id, "\x00")
	return scope, keyOf(k)
}

// loadedRecord is loadedRecordOf of an id (IdemID).
func (v *IdemView) loadedRecord(id string) (*IdemRecord, error) {
	scope, key, _ := strings.Cut(id, "\x00")
	return v.loadedRecordOf(scope, key)
}
