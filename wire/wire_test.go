package wire

import (
	"testing"

	"github.com/google/uuid"
)

// TestIsUUIDMatchesTheUUIDLibrary: the one identifier check agrees with a
// parse by github.com/google/uuid (version 4, RFC 4122 variant, canonical
// lowercase form) on accepted and refused inputs alike.
func TestIsUUIDMatchesTheUUIDLibrary(t *testing.T) {
	lib := func(s string) bool {
		u, err := uuid.Parse(s)
		return err == nil && len(s) == 36 && u.Version() == 4 && u.Variant() == uuid.RFC4122 && u.String() == s
	}
	cases := []string{
		"", "not-a-uuid", "3f1c2a9e-8b7d-4c6e-9a5f-1e2d3c4b5a69", "3F1C2A9E-8B7D-4C6E-9A5F-1E2D3C4B5A69",
		"3f1c2a9e-8b7d-1c6e-9a5f-1e2d3c4b5a69", "3f1c2a9e-8b7d-4c6e-7a5f-1e2d3c4b5a69",
		"{3f1c2a9e-8b7d-4c6e-9a5f-1e2d3c4b5a69}", "urn:uuid:3f1c2a9e-8b7d-4c6e-9a5f-1e2d3c4b5a69",
		"3f1c2a9e8b7d4c6e9a5f1e2d3c4b5a69", "3f1c2a9e-8b7d-4c6e-ca5f-1e2d3c4b5a69",
	}
	for range 200 {
		cases = append(cases, uuid.NewString())
	}
	// Every position of a valid identifier changed to every kind of byte
	// (and the identifier one byte shorter or longer).
	base := "3f1c2a9e-8b7d-4c6e-9a5f-1e2d3c4b5a69"
	for i := range base {
		for _, c := range []byte("-0489abcfgAF\x00\xff") {
			cases = append(cases, base[:i]+string(c)+base[i+1:])
		}
	}
	cases = append(cases, base[:35], base+"0", base+"\n")
	for _, s := range cases {
		if got, want := IsUUID(s), lib(s); got != want {
			t.Errorf("IsUUID(%q) = %v, the uuid library says %v", s, got, want)
		}
	}
}

// TestStatesAreDistinct: every state is listed once and no two share a name.
func TestStatesAreDistinct(t *testing.T) {
	seen := map[State]bool{}
	for _, s := range AllStates() {
		if seen[s] || s == "" {
			t.Errorf("state %q listed twice or empty", s)
		}
		seen[s] = true
	}
	if len(seen) != 7 {
		t.Errorf("%d states, want 7", len(seen))
	}
}

// TestFormatMillisHasThreeDigits: every time is written with exactly
// milliseconds in UTC.
func TestFormatMillisHasThreeDigits(t *testing.T) {
	for ms, want := range map[int64]string{0: "1970-01-01T00:00:00.000Z", 1: "1970-01-01T00:00:00.001Z", 1700000000120: "2023-11-14T22:13:20.120Z"} {
		if got := FormatMillis(ms); got != want {
			t.Errorf("FormatMillis(%d) = %s, want %s", ms, got, want)
		}
	}
}
