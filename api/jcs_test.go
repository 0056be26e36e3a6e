package api

import (
	"math/rand/v2"
	"strings"
	"testing"
	"unicode/utf16"
)

// RFC 8785's key-sorting example (section 3.2.3): UTF-16 order puts the
// emoji (a surrogate pair) before U+FB33.
func TestCanonicalJSONSortsKeysByUTF16(t *testing.T) {
	m, err := parseStrict([]byte(`{"\u20ac":"Euro Sign","\r":"Carriage Return","\ufb33":"Hebrew Letter Dalet With Dagesh",` +
		`"1":"One","\ud83d\ude00":"Emoji: Grinning Face","\u0080":"Control","\u00f6":"Latin Small Letter O With Diaeresis"}`))
	if err != nil {
		t.Fatal(err)
	}
	got, err := canonicalJSON(m)
	if err != nil {
		t.Fatal(err)
	}
	want := "{\"\\r\":\"Carriage Return\",\"1\":\"One\",\"\u0080\":\"Control\",\"ö\":\"Latin Small Letter O With Diaeresis\"," +
		"\"€\":\"Euro Sign\",\"😀\":\"Emoji: Grinning Face\",\"\ufb33\":\"Hebrew Letter Dalet With Dagesh\"}"
	if got != want {
		t.Errorf("got  %s\nwant %s", got, want)
	}
}

// cmpUTF16 orders as comparing the strings' UTF-16 encodings does.
func TestCmpUTF16IsUTF16Order(t *testing.T) {
	units := func(s string) []uint16 { return utf16.Encode([]rune(s)) }
	oracle := func(a, b string) int {
		ua, ub := units(a), units(b)
		for i := 0; i < len(ua) && i < len(ub); i++ {
			if ua[i] != ub[i] {
				if ua[i] < ub[i] {
					return -1
				}
				return 1
			}
		}
		switch {
		case len(ua) < len(ub):
			return -1
		case len(ua) > len(ub):
			return 1
		}
		return 0
	}
	pieces := []string{"", "a", "b", "A", "\u0080", "ö", "€", "\ufb33", "\uffff", "😀", "😁", "\U0010ffff", "\U00010000", "\xff", "\ufffd"}
	rng := rand.New(rand.NewPCG(3, 4))
	var cases []string
	for range 2000 {
		var b strings.Builder
		for range rng.IntN(4) {
			b.WriteString(pieces[rng.IntN(len(pieces))])
		}
		cases = append(cases, b.String())
	}
	for i := 0; i+1 < len(cases); i++ {
		a, b := cases[i], cases[i+1]
		if got, want := cmpUTF16(a, b), oracle(a, b); got != want {
			t.Errorf("cmpUTF16(%q, %q) = %d, UTF-16 order says %d", a, b, got, want)
		}
	}
}

// writeCanonicalString writes what writing rune by rune wrote: RFC 8785's
// escapes, everything else as it is, invalid UTF-8 as U+FFFD.
func TestCanonicalStringsEscapeOnlyWhatJSONRequires(t *testing.T) {
	oracle := func(s string) string {
		var b strings.Builder
		b.WriteByte('"')
		for _, r := range s {
			switch r {
			case '"':
				b.WriteString(`\"`)
			case '\\':
				b.WriteString(`\\`)
			case '\b':
				b.WriteString(`\b`)
			case '\f':
				b.WriteString(`\f`)
			case '\n':
				b.WriteString(`\n`)
			case '\r':
				b.WriteString(`\r`)
			case '\t':
				b.WriteString(`\t`)
			default:
				if r < 0x20 {
					b.WriteString(`\u00`)
					b.WriteByte("0123456789abcdef"[r>>4])
					b.WriteByte("0123456789abcdef"[r&0xf])
				} else {
					b.WriteRune(r)
				}
			}
		}
		b.WriteByte('"')
		return b.String()
	}
	pieces := []string{"a", "Z", " ", "\"", "\\", "\b", "\f", "\n", "\r", "\t", "\x00", "\x1f", "\x7f", "é", "😀", "\u2028", "\xff", "\xc3", "/", "<"}
	rng := rand.New(rand.NewPCG(5, 6))
	for range 3000 {
		var in strings.Builder
		for range rng.IntN(6) {
			in.WriteString(pieces[rng.IntN(len(pieces))])
		}
		var got strings.Builder
		writeCanonicalString(&got, in.String())
		if want := oracle(in.String()); got.String() != want {
			t.Errorf("%q: got %q, want %q", in.String(), got.String(), want)
		}
	}
}
