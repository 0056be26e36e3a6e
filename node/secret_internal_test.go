package node

import (
	"testing"

	"taskledger/snapshots"
)

// TestClaimsVerifiedThrough: start-up recomputes only the server-issued
// claims after a snapshot that records the same key-check value, or that
// covers no server-issued claim; all of them otherwise.
func TestClaimsVerifiedThrough(t *testing.T) {
	kcv := []byte("kcv-of-this-secret")
	snap := func(k []byte) *snapshots.Header { return &snapshots.Header{Seq: 40, KeyCheck: k} }
	cases := []struct {
		name string
		l    Loaded
		want uint64
	}{
		{"no snapshot", Loaded{}, 0},
		{"same key-check value", Loaded{Snapshot: snap(kcv), SnapshotServerClaims: 3}, 40},
		{"other key-check value", Loaded{Snapshot: snap([]byte("another")), SnapshotServerClaims: 3}, 0},
		{"claims not verified (offline snapshot)", Loaded{Snapshot: snap(nil), SnapshotServerClaims: 3}, 0},
		{"no server-issued claim covered", Loaded{Snapshot: snap(nil)}, 40},
	}
	for _, c := range cases {
		if got := claimsVerifiedThrough(&c.l, kcv); got != c.want {
			t.Errorf("%s: %d, want %d", c.name, got, c.want)
		}
	}
}
