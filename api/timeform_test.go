package api

import (
	"regexp"
	"testing"
	"time"

	"taskledger/wire"
)

// TestTimePatternIsWhatTheServerAccepts: the server reads a time exactly
// when it matches the document's pattern (wire.TimePattern) and is a real
// RFC 3339 date-time (format date-time). More than three fractional digits
// stay refused, as the contract says, nanoseconds included: a generated
// client must send a time truncated to the millisecond.
func TestTimePatternIsWhatTheServerAccepts(t *testing.T) {
	pattern := regexp.MustCompile(wire.TimePattern)
	for _, c := range []struct {
		in   string
		want int64 // Unix ms; -1: refused
	}{
		{"2026-01-01T00:00:00Z", 1767225600000},
		{"2026-01-01T00:00:00.1Z", 1767225600100},
		{"2026-01-01T00:00:00.12Z", 1767225600120},
		{"2026-01-01T00:00:00.123Z", 1767225600123},
		{"2026-01-01T00:00:00.123+00:00", 1767225600123},
		{"2026-01-01T00:00:00.123-00:00", 1767225600123},
		{"2026-01-01T00:00:00.1234Z", -1},
		{"2026-01-01T00:00:00.123456789Z", -1},
		{"2026-01-01T00:00:00.Z", -1},
		{"2026-01-01T00:00:00+01:00", -1},
		{"2026-01-01T00:00:00", -1},
		{"2026-01-01 00:00:00Z", -1},
		{"2026-01-01t00:00:00z", -1},
		{"2026-02-30T00:00:00Z", -1},
		{"2026-01-01T25:00:00Z", -1},
		{"", -1},
	} {
		got, err := parseTime(c.in)
		if c.want < 0 {
			if err == nil {
				t.Errorf("%q: accepted as %d, want refused", c.in, got)
			}
		} else if err != nil || got != c.want {
			t.Errorf("%q: %d, %v; want %d", c.in, got, err, c.want)
		}
		_, rfcErr := time.Parse(time.RFC3339Nano, c.in)
		if docAllows := pattern.MatchString(c.in) && rfcErr == nil; docAllows != (err == nil) {
			t.Errorf("%q: the document allows it: %v, the server accepts it: %v", c.in, docAllows, err == nil)
		}
	}
	// What a Go client generated from the document sends: a time.Time
	// truncated to the millisecond, written by encoding/json.
	now := time.Date(2026, 1, 1, 0, 0, 0, 123456789, time.UTC)
	b, _ := now.Truncate(time.Millisecond).MarshalJSON()
	if _, err := parseTime(string(b[1 : len(b)-1])); err != nil {
		t.Errorf("a millisecond time.Time (%s) is refused: %v", b, err)
	}
}
