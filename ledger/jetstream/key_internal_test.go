package jetstream

import (
	"errors"
	"strings"
	"testing"

	"taskledger/ledger"
)

func TestKVKeyRoundTripsAndKeepsPrefixes(t *testing.T) {
	keys := []string{"", "presence/d1", "idem/device:d 1/op/key", "a.b", "a=b", "ü", "lease/", "=2e"}
	for _, k := range keys {
		enc := kvKey(k)
		for i := 0; i < len(enc); i++ {
			c := enc[i]
			if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || strings.IndexByte("-_/=", c) >= 0) {
				t.Fatalf("kvKey(%q) = %q holds %q", k, enc, c)
			}
		}
		back, err := unKVKey(enc)
		if err != nil || back != k {
			t.Fatalf("unKVKey(kvKey(%q)) = %q, %v", k, back, err)
		}
		for _, p := range []string{"", "a", "idem/"} {
			if strings.HasPrefix(k, p) != strings.HasPrefix(enc, kvKey(p)) && p != "" {
				t.Fatalf("prefix %q of %q not kept by the mapping", p, k)
			}
		}
	}
	for _, bad := range []string{"=4", "=zz", "a=1"} {
		if _, err := unKVKey(bad); !errors.Is(err, ledger.ErrCorrupt) {
			t.Fatalf("unKVKey(%q): %v, want ErrCorrupt", bad, err)
		}
	}
}
