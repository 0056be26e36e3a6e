package api

import (
	"regexp"
	"strings"
	"testing"
)

// The byte-class checks accept exactly what the patterns of api.md
// accept.
func TestByteClassesMatchTheirPatterns(t *testing.T) {
	for _, tc := range []struct {
		pattern string
		check   func(string) bool
	}{
		{`^[A-Za-z0-9_-]{43}$`, clientToken},
		{`^[0-9a-f]{64}$`, serverToken},
	} {
		re := regexp.MustCompile(tc.pattern)
		var cases []string
		for _, n := range []int{0, 1, 31, 32, 33, 42, 43, 44, 63, 64, 65} {
			for _, c := range []string{"a", "z", "0", "9", "_", "-", "A", "Z", "f", "g", " ", "\n", "é", "\x00", "\xff"} {
				cases = append(cases, strings.Repeat(c, n), strings.Repeat("a", max(n-1, 0))+c, c+strings.Repeat("0", max(n-1, 0)))
			}
		}
		for _, s := range cases {
			if got, want := tc.check(s), re.MatchString(s); got != want {
				t.Errorf("%s: %q → %v, the pattern says %v", tc.pattern, s, got, want)
			}
		}
	}
}
