package failpoint

import (
	"errors"
	"reflect"
	"testing"
)

func TestParseReadsAListOfPointsAndActions(t *testing.T) {
	got, err := Parse(" snapshot-mid-write , blob-write=enospc,,claim-before-send=kill")
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]string{SnapshotMidWrite: ActionKill, BlobWrite: "enospc", ClaimBeforeSend: ActionKill}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("Parse = %v, want %v", got, want)
	}
	if got, err := Parse(""); err != nil || len(got) != 0 {
		t.Fatalf("empty list: %v, %v", got, err)
	}
}

func TestParseRefusesUnknownPointsAndActions(t *testing.T) {
	for _, tc := range []struct {
		spec string
		want error
	}{
		{"no-such-point", ErrUnknownPoint},
		{"blob-write=explode", ErrBadAction},
		{"snapshot-mid-write=enospc", ErrBadAction}, // kill-only point
		{"blob-write=eio,typo", ErrUnknownPoint},
	} {
		if _, err := Parse(tc.spec); !errors.Is(err, tc.want) {
			t.Errorf("Parse(%q) = %v, want %v", tc.spec, err, tc.want)
		}
	}
}

// Every named constant is in Points (so Parse accepts it).
func TestEveryPointIsListed(t *testing.T) {
	for _, n := range []string{ClaimCommitted, SnapshotMidWrite, SnapshotAfterTmpWrite, BlobWrite,
		CommitWrite, CommitSync, ClaimBeforeSend, ClaimAfterResponse, StartAfterResponse, SideFileWritten, SideFileSynced, SideFileRenamed} {
		if _, ok := Points[n]; !ok {
			t.Errorf("%s is not in Points", n)
		}
	}
	if len(Points) != 12 {
		t.Errorf("Points has %d entries, the test lists 12", len(Points))
	}
}
