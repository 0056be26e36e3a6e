package projections

import (
	"bytes"
	"math"
	"testing"

	"taskledger/ledger"
)

// TestSoftLeaseEncodesAsMarshalDoes: the hand-written encoding of a soft
// lease is byte for byte what the reflective encoder gives, for values of
// every integer width, and decodes back to the same lease.
func TestSoftLeaseEncodesAsMarshalDoes(t *testing.T) {
	for _, l := range []SoftLease{
		{},
		{TaskID: "f4d644ad-69a0-4688-9707-020caa55412a", ExecutionID: "657aef81-da7b-4bdc-88ab-9f579cc3a020", Generation: 1,
			LeaseExpiresAt: 1796593820256, SeenAt: 1796593730256},
		{TaskID: "t", ExecutionID: "", Generation: math.MaxUint64, LeaseExpiresAt: -1, SeenAt: math.MinInt64},
		{TaskID: string(make([]byte, 300)), ExecutionID: "x", Generation: 255, LeaseExpiresAt: 65536, SeenAt: math.MaxInt64},
	} {
		want, err := ledger.Marshal(&l)
		if err != nil {
			t.Fatal(err)
		}
		got := l.Encode()
		if !bytes.Equal(got, want) {
			t.Fatalf("%+v: Encode %x, Marshal %x", l, got, want)
		}
		var back SoftLease
		if err := ledger.Unmarshal(got, &back); err != nil || back != l {
			t.Fatalf("%+v decodes to %+v (%v)", l, back, err)
		}
	}
}
