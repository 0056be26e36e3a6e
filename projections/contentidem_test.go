package projections

import (
	"reflect"
	"strings"
	"testing"
)

// TestLoadedRecordsAreFoundByTheirIDs: every record of a restored
// snapshot is found by its id (compared in place with the record's scope
// and key) and decodes to the record encoded, UUIDs and all; an id
// without a record is not found.
func TestLoadedRecordsAreFoundByTheirIDs(t *testing.T) {
	s := contentState(t)
	r, err := Restore(must(s.Canonical()), s.Config())
	if err != nil {
		t.Fatal(err)
	}
	for id, rec := range s.Idem.Records {
		if got := r.Idem.loadedRecord(id); !reflect.DeepEqual(got, rec) {
			t.Errorf("looking up %q in the loaded records: %#v, want %#v", id, got, rec)
		}
	}
	if r.Idem.loadedRecord("device:d0:op\x00k") != nil || r.Idem.loadedRecord("") != nil {
		t.Error("an id without a record was found")
	}
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

// TestIdemIDsCompareAsTheirStrings: the comparisons that spare building
// an id (scope + "\x00" + key) order ids exactly as the strings do,
// scopes that are prefixes of others and strings holding NUL included.
func TestIdemIDsCompareAsTheirStrings(t *testing.T) {
	parts := []string{"", "a", "ab", "a\x00", "a\x00b", "b", "\x00", "\x00\x00", "device:1:claim-next", "device:1:claim"}
	sign := func(c int) int { return max(-1, min(1, c)) }
	for _, s1 := range parts {
		for _, k1 := range parts {
			id := IdemID(s1, k1)
			for _, s2 := range parts {
				for _, k2 := range parts {
					want := sign(strings.Compare(id, IdemID(s2, k2)))
					if got := sign(cmpIdemID(id, s2, k2)); got != want {
						t.Errorf("cmpIdemID(%q, %q, %q) = %d, want %d", id, s2, k2, got, want)
					}
					if got := sign(cmpIdemIDs(s1, k1, s2, k2)); got != want {
						t.Errorf("cmpIdemIDs(%q, %q, %q, %q) = %d, want %d", s1, k1, s2, k2, got, want)
					}
				}
			}
		}
	}
}

func must[T any](v T, err error) T {
	if err != nil {
		panic(err)
	}
	return v
}
